# frozen_string_literal: true

require_relative "apps_helper"
require "timeout"
require "socket"
require "open3"
require "pg"
require "mysql2"
require "redis"
require "active_record"
require "active_record/connection_adapters/postgresql_adapter"
require "sequel"
require "sequel/adapters/postgres"
require "sqlite3"
require "net/http"
require "net/http/persistent"
require "excon"
require "faraday"
require "httpx"
require "curb"

# Timeout.timeout(0.3) around a call of each driver that would take seconds:
# Timeout::Error must come at the deadline (asserted with a wide margin:
# before the call would have ended by itself) and the driver must serve the
# next call. Under a fiber scheduler Timeout asks the scheduler
# (timeout_after), which raises into the fiber at its wait; a call that
# waits in C without the scheduler gives the loop no chance to do so.
class AppsTimeoutTest < Minitest::Test
  include ClientsSuite::Case

  DEADLINE = 0.3
  # The calls take 1.5 s (the waits in C 1.5 to 2 s); Timeout::Error must
  # come well before that.
  LATE = DEADLINE + 0.7
  SLOW = 1.5

  HELD_LIMIT = "the call waits in C without asking the scheduler and cannot be interrupted (SQLite holds the GVL; " \
               "libmariadb's connect ignores Thread#raise), so Timeout's error comes at the call's own end, " \
               "without a scheduler too"
  # What the timeout gem does under a scheduler: scheduler.timeout_after(sec,
  # Timeout::Error, ...) raises Timeout::Error itself at the fiber's wait;
  # without one it raises an internal exception (Timeout::ExitException, not
  # a StandardError) and turns it into Timeout::Error outside the block.
  RESCUED_LIMIT = "under a fiber scheduler the timeout gem raises Timeout::Error itself at the fiber's wait " \
                  "(timeout_after), and %s; without a scheduler it raises Timeout::ExitException, which the " \
                  "library does not rescue"

  # A marker in the slow queries' text, so that the case can cancel the one
  # it abandoned (pg_stat_activity shows the text).
  def marker = "farce-apps-#{Process.pid}"

  # Cancels this case's abandoned pg_sleep on the server: otherwise the
  # interrupted connection's next query waits for it (libpq collects the
  # abandoned result first), as an ORM's pool hands that connection out again.
  def cancel_abandoned_queries
    conn = PG.connect(ClientsSuite::PG)
    conn.exec_params("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()",
                     ["%#{marker}%"])
    conn.close
  end

  def test_pg_exec
    clients_case("timeout", "pg: exec(pg_sleep(1.5)), then reset", needs: :pg) do |c|
      conn = PG.connect(ClientsSuite::PG)
      times_out(c) { conn.exec("SELECT pg_sleep(#{SLOW})") }
      conn.reset
      assert_equal [["1"]], conn.exec("SELECT 1").values
      conn.close
    end
  end

  def test_mysql2_query
    clients_case("timeout", "mysql2: query(SLEEP(1.5)), then a new client", needs: :mysql, blocks: "Mysql2::Client.new") do |c|
      connect = -> { Mysql2::Client.new(host: "127.0.0.1", port: ClientsSuite::MYSQL_PORT, username: "root", connect_timeout: 5) }
      client = connect.call
      times_out(c) { client.query("SELECT SLEEP(#{SLOW})") }
      fresh = connect.call
      assert_equal [{ "n" => 1 }], fresh.query("SELECT 1 AS n").to_a
      [client, fresh].each(&:close)
    end
  end

  def test_redis_blpop
    clients_case("timeout", "redis: BLPOP 1.5, then the same client", needs: :redis) do |c|
      redis = Redis.new(host: "127.0.0.1", port: ClientsSuite::REDIS_PORT)
      key = "#{ClientsSuite::PREFIX}:timeout"
      times_out(c) { redis.blpop(key, timeout: SLOW) }
      assert_equal "PONG", redis.ping # redis-client reconnects after the interrupted command
      redis.close
    end
  end

  def test_activerecord_query
    clients_case("timeout", "ActiveRecord pg: pg_sleep(1.5), then the pool", needs: :pg) do |c|
      ActiveSupport::IsolatedExecutionState.isolation_level = :fiber
      ActiveRecord::Base.establish_connection(AppsSuite.activerecord_pg(pool: 2, checkout_timeout: 5))
      pool = ActiveRecord::Base.connection_pool
      times_out(c) { pool.with_connection { |conn| conn.select_value("SELECT 1 FROM pg_sleep(#{SLOW}) /* #{marker} */") } }
      cancel_abandoned_queries
      assert_equal 0, pool.stat[:busy], "the interrupted query's connection was not given back: #{pool.stat}"
      assert_equal 7, pool.with_connection { |conn| conn.select_value("SELECT 7") }
      ActiveRecord::Base.connection_handler.clear_all_connections!
    end
  end

  def test_sequel_query
    clients_case("timeout", "Sequel pg: pg_sleep(1.5), then the pool", needs: :pg) do |c|
      Sequel.extension :fiber_concurrency
      db = Sequel.connect(max_connections: 2, pool_timeout: 5, **AppsSuite.sequel_pg)
      times_out(c) { db.fetch("SELECT 1 AS one FROM pg_sleep(#{SLOW}) /* #{marker} */").all }
      cancel_abandoned_queries
      assert_equal 7, db.fetch("SELECT 7 AS n").get(:n)
      db.disconnect
    end
  end

  # Each library's plain GET of a slow answer, with its defaults (the limit
  # says why the library turns the scheduler's Timeout::Error into something
  # else, when it does); Net::HTTP also with max_retries = 0, which lets it through.
  {
    "net_http" => ["Net::HTTP", format(RESCUED_LIMIT, "Net::HTTP rescues Timeout::Error around a request and retries " \
                                                      "an idempotent one (max_retries = 1): the block runs on for the retry"),
                   ->(uri) { Net::HTTP.get(uri) }],
    "net_http_no_retries" => ["Net::HTTP, max_retries = 0", nil, lambda { |uri|
      Net::HTTP.start(uri.host, uri.port) do |http|
        http.max_retries = 0
        http.get(uri.request_uri).body
      end
    }],
    "net_http_persistent" => ["net-http-persistent", format(RESCUED_LIMIT, "Net::HTTP under it retries the GET as above"),
                              lambda { |uri|
                                http = Net::HTTP::Persistent.new(name: "farce-apps-timeout")
                                begin
                                  http.request(uri).body
                                ensure
                                  http.shutdown
                                end
                              }],
    "excon" => ["excon", format(RESCUED_LIMIT, "excon rescues it at its socket wait and raises Excon::Error::Socket " \
                                               "(\"execution expired (Timeout::Error)\") in its place"),
                ->(uri) { Excon.get(uri.to_s).body }],
    "faraday" => ["faraday", format(RESCUED_LIMIT, "Faraday's net_http adapter rescues it and raises " \
                                                   "Faraday::TimeoutError (not a Timeout::Error) in its place"),
                  ->(uri) { Faraday.get(uri).body }],
    # HTTPX returns errors as an ErrorResponse; raise_for_status raises them
    "httpx" => ["httpx", nil, ->(uri) { HTTPX.get(uri.to_s).raise_for_status.to_s }],
    "curb" => ["curb", nil, ->(uri) { Curl.get(uri.to_s).body_str }],
  }.each do |slug, (name, limit, slow_get)|
    define_method(:"test_#{slug}_get") do
      base = AppsSuite.http_base
      clients_case("timeout", "#{name}: GET of a #{SLOW} s answer, then a quick one", limit: limit) do |c|
        times_out(c) { slow_get.call(URI("#{base}/slow?s=#{SLOW}")) }
        assert_equal "hello again", Net::HTTP.get(URI("#{base}/hello?n=again"))
      end
    end
  end

  def test_open3_child
    clients_case("timeout", "Open3.popen3: waiting for `sleep 1.5`, then kill it") do |c|
      Open3.popen3("sleep", SLOW.to_s) do |stdin, stdout, stderr, wait|
        times_out(c) { wait.value }
        Process.kill("KILL", wait.pid)
        assert_equal "KILL", Signal.signame(wait.value.termsig)
        [stdin, stdout, stderr].each(&:close)
      end
    end
  end

  def test_sqlite_busy_timeout
    clients_case("timeout", "sqlite3: a 1.5 s busy_timeout wait", limit: HELD_LIMIT, holds_the_loop: true) do |c|
      Dir.mktmpdir do |dir|
        path = File.join(dir, "apps.sqlite3")
        holder = SQLite3::Database.new(path)
        holder.execute("CREATE TABLE t (n INTEGER)")
        holder.execute("BEGIN IMMEDIATE")
        waiter = SQLite3::Database.new(path)
        waiter.busy_timeout = 1500
        times_out(c) { waiter.execute("INSERT INTO t VALUES (1)") }
        [holder, waiter].each(&:close)
      end
    end
  end

  # mysql_real_connect to a peer that accepts (the kernel does, into the
  # listen backlog) and never sends MariaDB's greeting: libmariadb waits in C
  # until its connect_timeout.
  def test_mysql2_connect_to_a_silent_peer
    clients_case("timeout", "mysql2: connect to a peer that never greets (2 s)", limit: HELD_LIMIT, holds_the_loop: true,
                                                                                  blocks: "Mysql2::Client.new") do |c|
      silent = TCPServer.new("127.0.0.1", 0)
      times_out(c) do
        Mysql2::Client.new(host: "127.0.0.1", port: silent.addr[1], username: "root", connect_timeout: 2)
      end
      silent.close
    end
  end

  # Timeout.timeout(DEADLINE) around the block: it must raise Timeout::Error,
  # before LATE.
  def times_out(c)
    started = c.now
    assert_raises(Timeout::Error) { Timeout.timeout(DEADLINE) { yield } }
    elapsed = c.now - started
    assert_operator elapsed, :<, LATE, "Timeout::Error came #{elapsed.round(2)} s after the start (the deadline #{DEADLINE} s)"
    c.note(format("Timeout::Error after %.2f s", elapsed))
  end
end
