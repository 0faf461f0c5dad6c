# frozen_string_literal: true

require_relative "case_helper"
require "pg"

# PostgreSQL through ruby-pg (libpq): since pg 1.3, exec, connect and reset
# are libpq's asynchronous calls waiting through Ruby's IO, so they park the
# fiber; sync_exec is libpq's blocking call and holds the loop by design.
class ClientsPgTest < Minitest::Test
  include ClientsSuite::Case

  QUERY_SLEEP = 0.2

  def connect
    PG.connect(ClientsSuite::PG)
  end

  def test_concurrent_pg_sleep_take_about_one_query
    clients_case("pg", "20 concurrent pg_sleep(0.2) vs serial", needs: :pg) do |c|
      conns = c.fibers(20) { connect }
      serial = c.timed { 3.times { |i| assert_equal [[i.to_s]], conns[0].exec("SELECT #{i} FROM pg_sleep(#{QUERY_SLEEP})").values } }
      per_query = serial / 3
      values = nil
      concurrent = c.timed do
        values = c.fibers(20) { |i| conns[i].exec_params("SELECT $1::int * 3 FROM pg_sleep(#{QUERY_SLEEP})", [i]).getvalue(0, 0) }
      end
      assert_equal (0...20).map { |i| (i * 3).to_s }, values
      # serially the 20 would take 20 queries' time; concurrently about one
      assert_operator concurrent, :<, per_query * 20 / 4, "20 queries took #{concurrent.round(2)} s, one takes #{per_query.round(2)} s"
      c.note(format("serial %.2f s per query, 20 concurrent %.2f s", per_query, concurrent))
      conns.each(&:close)
    end
  end

  def test_listen_notify_between_fibers
    clients_case("pg", "LISTEN/NOTIFY between fibers", needs: :pg) do |c|
      channel = "farce_#{Process.pid}"
      listener = connect
      listener.exec("LISTEN #{channel}")
      received = c.fiber do
        Array.new(10) do
          got = nil
          listener.wait_for_notify(10) { |ch, pid, payload| got = [ch, pid, payload] }
          got or flunk "no notification within 10 s"
        end
      end
      notifier = connect
      10.times { |i| notifier.exec("NOTIFY #{channel}, 'message #{i}'") }
      got = received.value
      assert_equal Array.new(10) { channel }, got.map(&:first)
      assert_equal Array.new(10) { notifier.backend_pid }, got.map { |n| n[1] }
      assert_equal Array.new(10) { |i| "message #{i}" }, got.map(&:last)
      [listener, notifier].each(&:close)
    end
  end

  def test_refused_connection_raises_connection_bad
    clients_case("pg", "refused connection raises PG::ConnectionBad", needs: :pg) do |c|
      port = closed_port
      others = c.fiber { Array.new(5) { |i| sleep 0.01; i } }
      error = assert_raises(PG::ConnectionBad) { PG.connect(host: "127.0.0.1", port: port, user: "postgres", connect_timeout: 5) }
      assert_match(/refused|could not connect/i, error.message)
      assert_equal [0, 1, 2, 3, 4], others.value
    end
  end

  def test_timeout_inside_a_query_then_reset
    clients_case("pg", "Timeout inside a query, reset, usable", needs: :pg) do |c|
      conn = connect
      t = c.now
      assert_raises(Timeout::Error) { Timeout.timeout(0.3) { conn.exec("SELECT pg_sleep(30)") } }
      assert_operator c.now - t, :<, 10, "the Timeout fired late"
      conn.reset
      assert_equal PG::CONNECTION_OK, conn.status
      assert_equal [["42", "farce"]], conn.exec_params("SELECT $1::int, $2::text", [42, "farce"]).values
      conn.close
    end
  end

  def test_pool_of_five_shared_by_fifty_fibers
    clients_case("pg", "pool of 5 connections shared by 50 fibers", needs: :pg) do |c|
      pool = Thread::Queue.new
      conns = c.fibers(5) { connect }
      conns.each { |conn| pool << conn }
      serial = c.timed { 3.times { conns[0].exec("SELECT pg_sleep(0.05)") } }
      used = Hash.new(0)
      values = nil
      wall = c.timed do
        values = c.fibers(50) do |i|
          conn = pool.pop
          begin
            used[conn.backend_pid] += 1
            conn.exec_params("SELECT $1::int + 1000, pg_sleep(0.05)", [i]).getvalue(0, 0)
          ensure
            pool << conn
          end
        end
      end
      assert_equal (0...50).map { |i| (i + 1000).to_s }, values
      assert_equal 5, used.size, "every connection of the pool served"
      assert_equal 50, used.values.sum
      assert_equal 5, pool.size
      # 50 queries on 5 connections: a fifth of the serial time, asserted at 0.6 (a loaded machine
      # adds the CPU of 50 queries to the pool's 10 rounds)
      assert_operator wall, :<, serial / 3 * 50 * 0.6, "50 pooled queries took #{wall.round(2)} s, one #{(serial / 3).round(3)} s"
      c.note(format("one query %.3f s, 50 on the pool %.2f s", serial / 3, wall))
      conns.each(&:close)
    end
  end

  # pg's sync_exec is libpq's PQexec: it blocks the thread, and so the loop,
  # for the whole query. The case shows the gap and farce's stall report.
  # The Ruby loop's watchdog is a thread: it can report only when the call
  # lets other threads run (pg 1.4 releases the GVL in sync_exec, pg 1.7
  # holds it); a thread counting during the call tells which.
  def test_sync_exec_blocks_the_loop_by_design
    clients_case("pg", "sync_exec(pg_sleep(0.3)) holds the loop", needs: :pg, blocks: "PG::Connection#sync_exec",
                                                            holds_the_loop: true) do |c|
      conn = connect
      ticks = 0
      ticker = c.fiber { 20.times { sleep 0.01; ticks += 1 } }
      thread_ran = 0
      thread = Thread.new { loop { thread_ran += 1; sleep 0.005 } }
      sleep 0.02
      before = ticks
      thread_before = thread_ran
      assert_equal [["1"]], conn.sync_exec("SELECT 1 FROM pg_sleep(0.3)").values
      releases_gvl = thread_ran - thread_before > 5
      thread.kill.join
      assert_operator ticks - before, :<=, 1, "other fibers ran during sync_exec: it did not block"
      ticker.value
      if c.farce?
        sleep 0.01 # the report comes once the fiber gave the loop back
        long = c.stalls.select { |r| r.duration >= 0.25 }
        if Fiber.scheduler.backend == :ruby && !releases_gvl
          c.note("no report required: this pg's sync_exec holds the GVL, so the Ruby loop's watchdog thread cannot run " \
                 "(#{long.size} report(s))")
        else
          refute_empty long, "no stall report of 0.25 s or more for sync_exec (got #{c.stalls.map(&:duration)})"
          c.note("stall report at #{long.first.location}")
        end
      end
      conn.close
    end
  end

  def closed_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end
end
