# frozen_string_literal: true

require_relative "apps_helper"
require "net/http"
require "pg"
require "fileutils"
require_relative "../support/free_port"

# A Sinatra application on ActiveRecord (pool of 5 PostgreSQL connections,
# isolation_level = :fiber) served by real Falcon (sinatra_app.ru), under
# load from the case's loop: 50 fibers of Net::HTTP with keep-alive, then
# wrk. Falcon runs on io-event's selector: farce's (IO_EVENT_SELECTOR=Farce,
# the backend FARCE_BACKEND names; the Ruby loop has no selector, so under
# it the server runs on farce's default backend and only the clients on the
# Ruby loop) or, for the Async reference, EPoll.
#
# Falcon is not in Debian: FARCE_APPS_FALCON names its `falcon` executable and
# FARCE_APPS_FALCON_RUBYLIB its lib/ and those of the two gems it needs that
# Debian lacks (rake test:apps sets both from FARCE_PEER_SUITES); without
# them the case skips, saying so.
class AppsFalconTest < Minitest::Test
  include ClientsSuite::Case

  FALCON = ENV["FARCE_APPS_FALCON"]
  RUBYLIB = ENV["FARCE_APPS_FALCON_RUBYLIB"]
  APP = File.join(__dir__, "sinatra_app.ru")
  FIBERS = 50
  ROUNDS = 5
  START_TIMEOUT = 20

  def test_sinatra_on_falcon_with_a_database_pool_under_load
    skip "no Falcon: FARCE_APPS_FALCON is not set (rake test:apps sets it from FARCE_PEER_SUITES)" unless FALCON
    clients_case("falcon", "Sinatra + ActiveRecord pool 5: #{FIBERS} fibers x #{ROUNDS}, then wrk", needs: :pg, timeout: 45) do |c|
      serve(c) { |port, log| load_case(c, port, log) }
    end
  end

  def load_case(c, port, log)
    expected = c.farce? ? "Farce::IOEventSelector" : "IO::Event::Selector::#{ENV.fetch('IO_EVENT_SELECTOR', 'EPoll')}"
    assert_equal expected, get(port, "/selector"), "the server's selector"
    # each fiber: keep-alive, a GET and a POST per round; its widgets are its own
    bodies = c.fibers(FIBERS) do |f|
      Net::HTTP.start("127.0.0.1", port) do |http|
        Array.new(ROUNDS) do |r|
          id = (f * ROUNDS + r) % 100 + 1
          [http.get("/widgets/#{id}").body.split[0, 3].join(" "), http.post("/widgets/#{id}/hit", "").code]
        end
      end
    end
    assert_equal Array.new(FIBERS) { |f| Array.new(ROUNDS) { |r| id = (f * ROUNDS + r) % 100 + 1; ["#{id} widget #{id}", "200"] } },
                 bodies
    wrk = run_wrk(port)
    assert_match(/(\d+) requests in/, wrk, "wrk's report")
    refute_match(/Non-2xx|Socket errors/, wrk, "wrk saw errors")
    requests = wrk[/(\d+) requests in/, 1].to_i
    # every connection comes back once the requests wrk abandoned at its end are served
    stat = nil
    deadline = c.now + 10
    loop do
      stat = get(port, "/pool").split.map(&:to_i)
      break if (stat[2].zero? && stat[3].zero?) || c.now > deadline

      sleep 0.05
    end
    size, connections, busy, waiting, peak = stat
    assert_equal [5, 0, 0], [size, busy, waiting], "the pool after the load (size, busy, waiting)"
    assert_operator connections, :<=, 5
    assert_operator peak, :>, 5, "never more requests in flight than connections: the pool was never contended"
    hits = PG.connect(ClientsSuite::PG) { |conn| conn.exec("SELECT sum(hits) FROM #{@table}").getvalue(0, 0).to_i }
    assert_equal FIBERS * ROUNDS, hits, "hits counted in transactions"
    c.note("wrk: #{requests} requests in 1 s (#{wrk[%r{Latency\s+\S+}]}); #{peak} requests in flight at most; server log #{File.basename(log)}")
  end

  # Makes the widgets table, starts Falcon on a free port, waits until it
  # serves, yields [port, log], stops it (TERM, KILL after 5 s) and drops
  # the table.
  def serve(c)
    @table = AppsSuite.table("widgets")
    PG.connect(ClientsSuite::PG) do |conn|
      conn.exec("CREATE TABLE #{@table} (id serial PRIMARY KEY, name text NOT NULL, hits integer NOT NULL DEFAULT 0)")
      conn.exec("INSERT INTO #{@table} (name) SELECT 'widget ' || g FROM generate_series(1, 100) g")
    end
    logs = File.join(AppsSuite::ROOT, "tmp", "apps")
    FileUtils.mkdir_p(logs)
    log = File.join(logs, "falcon-#{ClientsSuite.loop_name}.log")
    port = FreePort.free_port
    env = { "RUBYLIB" => RUBYLIB, "FARCE_APPS_DATABASE_URL" => AppsSuite.pg_url(pool: 5, checkout_timeout: 10),
            "FARCE_APPS_TABLE" => @table,
            # Falcon's controller runs Bundler.require when it finds a Gemfile upwards of its directory:
            # a Gemfile that does not exist is one it skips
            "BUNDLE_GEMFILE" => File.join(logs, "no-Gemfile") }
    env.merge!("IO_EVENT_SELECTOR" => "Farce", "RUBYOPT" => "-I#{AppsSuite::LIB} -rfarce/io_event") if c.farce?
    # one process (its container's one worker is a thread), in the case's
    # process group: a run killed as a whole takes it along
    pid = Process.spawn(env, RbConfig.ruby, FALCON, "serve", "-b", "http://127.0.0.1:#{port}", "-c", APP, "--threaded", "-n", "1",
                        chdir: logs, in: File::NULL, out: log, err: %i[child out])
    begin
      wait_until_serving(c, pid, port, log)
      yield port, log
    ensure
      stop(c, pid)
      PG.connect(ClientsSuite::PG) { |conn| conn.exec("DROP TABLE IF EXISTS #{@table}") }
    end
  end

  def wait_until_serving(c, pid, port, log)
    deadline = c.now + START_TIMEOUT
    loop do
      return if (get(port, "/widgets/1") rescue nil) # rubocop:disable Style/RescueModifier -- not up yet
      flunk "Falcon exited while starting:\n#{File.read(log)[-2000..]}" if Process.wait2(pid, Process::WNOHANG)
      flunk "Falcon did not serve within #{START_TIMEOUT} s:\n#{File.read(log)[-2000..]}" if c.now > deadline

      sleep 0.05
    end
  end

  def stop(c, pid)
    Process.kill("TERM", pid)
    deadline = c.now + 5
    sleep 0.02 until Process.wait2(pid, Process::WNOHANG) || c.now > deadline
    Process.kill("KILL", pid)
    Process.wait2(pid) rescue nil # rubocop:disable Style/RescueModifier -- reaped above
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  def get(port, path)
    http = Net::HTTP.new("127.0.0.1", port)
    http.open_timeout = http.read_timeout = 10
    response = http.start { |h| h.get(path) }
    raise "#{path}: HTTP #{response.code}: #{response.body[0, 200]}" unless response.code == "200"

    response.body
  end

  # wrk for 1 s, 50 connections, one thread; its report.
  def run_wrk(port)
    IO.popen(["wrk", "-t", "1", "-c", "50", "-d", "1s", "--timeout", "10s", "http://127.0.0.1:#{port}/widgets/7"],
             err: %i[child out], &:read)
  end
end
