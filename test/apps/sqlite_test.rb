# frozen_string_literal: true

require_relative "apps_helper"
require "sqlite3"
require "tmpdir"

# SQLite through sqlite3-ruby 2.x: every call runs inside SQLite's C code,
# holding the thread; what a fiber scheduler can do is only between calls.
# Contention between connections is where that shows: a writer that finds
# the database locked waits in SQLite's busy handler. With busy_timeout the
# handler sleeps in C, so the fiber that holds the lock cannot run to
# release it; busy_handler_timeout= (sqlite3 2.x) sleeps in Ruby between
# retries, which a scheduler turns into a fiber wait.
class AppsSqliteTest < Minitest::Test
  include ClientsSuite::Case

  BUSY_LIMIT = "busy_timeout waits inside SQLite's C code (sqlite3_busy_timeout: usleep in the busy handler), holding " \
               "the thread: the fiber holding the lock cannot run to commit until the wait ends, under any scheduler. " \
               "busy_handler_timeout= (sqlite3 >= 2.0) waits in Ruby and is the fiber-friendly form"

  def test_busy_timeout_contended_by_two_connections
    clients_case("sqlite", "busy_timeout: a writer waits for another's transaction", limit: BUSY_LIMIT,
                                                                                    holds_the_loop: true) do |c|
      contended(c) { |db| db.busy_timeout = 500 }
    end
  end

  def test_busy_handler_timeout_contended_by_two_connections
    clients_case("sqlite", "busy_handler_timeout: a writer waits for another's transaction") do |c|
      contended(c) { |db| db.busy_handler_timeout = 5000 }
    end
  end

  # busy_timeout's wait holds the loop as one C call: farce's stall
  # detection must report it (the case's point; other fibers cannot run).
  def test_busy_timeout_wait_reported_as_a_stall
    clients_case("sqlite", "busy_timeout's 0.5 s wait in C: a stall report", holds_the_loop: true,
                                                                              blocks: "SQLite3 busy_timeout") do |c|
      Dir.mktmpdir do |dir|
        path = File.join(dir, "apps.sqlite3")
        holder = SQLite3::Database.new(path)
        holder.execute("CREATE TABLE t (n INTEGER)")
        waiter = SQLite3::Database.new(path)
        waiter.busy_timeout = 500
        holder.execute("BEGIN IMMEDIATE")
        error = c.fiber { waiter.execute("INSERT INTO t VALUES (2)") rescue $! } # rubocop:disable Style/RescueModifier
        assert_kind_of SQLite3::BusyException, error.value
        holder.execute("COMMIT")
        if c.farce?
          sleep 0.01 # the report comes once the loop runs again
          long = c.stalls.select { |r| r.duration >= 0.4 }
          refute_empty long, "no stall report of 0.4 s or more for the busy wait (got #{c.stalls.map(&:duration)})"
          c.note("stall report at #{long.first.location}")
        end
        [holder, waiter].each(&:close)
      end
    end
  end

  # Many writers, each its own connection (WAL, busy_handler_timeout), from
  # fibers: every row lands.
  def test_twenty_writers_on_one_database
    clients_case("sqlite", "20 fibers, 20 connections, WAL: 200 inserts land") do |c|
      Dir.mktmpdir do |dir|
        path = File.join(dir, "apps.sqlite3")
        SQLite3::Database.new(path) do |db|
          db.execute("PRAGMA journal_mode=WAL")
          db.execute("CREATE TABLE t (fiber INTEGER, n INTEGER)")
        end
        c.fibers(20) do |f|
          db = SQLite3::Database.new(path)
          db.busy_handler_timeout = 5000
          10.times do |n|
            db.transaction(:immediate) do
              db.execute("INSERT INTO t VALUES (?, ?)", [f, n])
              sleep 0.001 # hold the write lock across a wait: the others find it taken
            end
          end
          db.close
        end
        SQLite3::Database.new(path) do |db|
          assert_equal 200, db.get_first_value("SELECT count(*) FROM t")
          assert_equal Array.new(20) { |f| [f, 10] }, db.execute("SELECT fiber, count(*) FROM t GROUP BY fiber ORDER BY fiber")
        end
      end
    end
  end

  # One connection holds the write lock in a transaction, in a fiber, and
  # gives the loop up before it commits; another connection, in another
  # fiber, inserts meanwhile. What an application expects: the insert waits
  # for the commit and lands.
  def contended(c)
    Dir.mktmpdir do |dir|
      path = File.join(dir, "apps.sqlite3")
      SQLite3::Database.new(path) { |db| db.execute("CREATE TABLE t (n INTEGER)") }
      holder = SQLite3::Database.new(path)
      waiter = SQLite3::Database.new(path)
      yield waiter
      started = Thread::Queue.new
      held = c.fiber do
        holder.transaction(:immediate) do
          holder.execute("INSERT INTO t VALUES (1)")
          started.pop # the waiter's fiber runs now, and finds the lock taken
          sleep 0.05
        end
      end
      inserted = c.fiber do
        started << :go
        t = c.now
        waiter.execute("INSERT INTO t VALUES (2)")
        c.now - t
      end
      held.value
      waited = inserted.value
      assert_equal [[1], [2]], holder.execute("SELECT n FROM t ORDER BY n")
      c.note(format("the writer waited %.2f s", waited))
      [holder, waiter].each(&:close)
    end
  end
end
