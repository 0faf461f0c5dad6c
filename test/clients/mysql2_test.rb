# frozen_string_literal: true

require_relative "case_helper"
require "mysql2"

# MariaDB through ruby-mysql2 (libmariadb). Queries wait for their answer
# through Ruby's IO (rb_wait_for_single_fd), so they park the fiber; connect
# is libmariadb's mysql_real_connect, which blocks the thread by design (with
# the GVL released). libmariadb also closes its socket itself, behind Ruby:
# on close and when a query is interrupted, and the next connection is
# handed the same descriptor number.
class ClientsMysql2Test < Minitest::Test
  include ClientsSuite::Case

  def connect(**options)
    Mysql2::Client.new(host: "127.0.0.1", port: ClientsSuite::MYSQL_PORT, username: "root", connect_timeout: 5,
                       **options)
  end

  def test_concurrent_sleep_queries
    clients_case("mysql2", "10 concurrent SLEEP(0.2) vs serial", needs: :mysql, blocks: "Mysql2::Client.new") do |c|
      clients = Array.new(10) { connect }
      serial = c.timed { 2.times { |i| assert_equal [{ "n" => i }], clients[0].query("SELECT #{i} AS n, SLEEP(0.2) AS s").map { |r| { "n" => r["n"] } } } }
      per_query = serial / 2
      values = nil
      concurrent = c.timed do
        values = c.fibers(10) { |i| clients[i].query("SELECT #{i} * 7 AS n, SLEEP(0.2) AS s").first["n"] }
      end
      assert_equal (0...10).map { |i| i * 7 }, values
      assert_operator concurrent, :<, per_query * 10 / 3, "10 queries took #{concurrent.round(2)} s, one #{per_query.round(2)} s"
      c.note(format("serial %.2f s per query, 10 concurrent %.2f s", per_query, concurrent))
      clients.each(&:close)
    end
  end

  # Each round closes its client: libmariadb close(2)s the socket, and the
  # next round's connection gets the same number.
  def test_connect_query_close_rounds_from_several_fibers
    clients_case("mysql2", "100 connect/query/close rounds from 5 fibers", needs: :mysql, blocks: "Mysql2::Client.new",
                                                                          timeout: 15) do |c|
      numbers = Hash.new(0)
      values = c.fibers(5) do |f|
        Array.new(20) do |round|
          client = connect
          numbers[client.socket] += 1
          n = client.query("SELECT #{f * 100 + round} AS n").first["n"]
          client.close
          sleep 0.001 if round.even? # let the other fibers' rounds interleave with this one's
          n
        end
      end
      assert_equal Array.new(5) { |f| Array.new(20) { |round| f * 100 + round } }, values
      c.note("#{numbers.size} distinct descriptor numbers for 100 connections")
    end
  end

  # A Timeout interrupts the wait for a query's answer: mysql2 then drops
  # the connection (libmariadb closes the socket), and a new client gets
  # the freed number. It must be answered at once, as on any fresh number.
  def test_timeout_inside_a_query_then_a_new_client_on_the_freed_number
    clients_case("mysql2", "Timeout inside a query, new client on the freed fd", needs: :mysql,
                                                                                blocks: "Mysql2::Client.new", timeout: 15) do |c|
      client = connect
      freed = client.socket
      t = c.now
      assert_raises(Timeout::Error) { Timeout.timeout(0.3) { client.query("SELECT SLEEP(30)") } }
      assert_operator c.now - t, :<, 10, "the Timeout fired late"
      client.close
      fresh = connect
      c.note(fresh.socket == freed ? "the new client got the freed number #{freed}" : "new client on fd #{fresh.socket}, the freed one was #{freed}")
      answer = c.fiber { fresh.query("SELECT 7 * 6 AS n").first["n"] }
      got = begin
        Timeout.timeout(5) { answer.value }
      rescue Timeout::Error
        flunk "the query on the new client (fd #{fresh.socket}; the interrupted one's was #{freed}) " \
              "was not answered in 5 s on #{ClientsSuite.loop_name}"
      end
      assert_equal 42, got
      fresh.close
    end
  end

  # mysql_real_connect blocks the thread until the server greets or the
  # connect timeout passes: against a peer that never greets, a whole second.
  def test_connect_blocks_the_loop_by_design
    clients_case("mysql2", "connect to a silent peer holds the loop", needs: :mysql, blocks: "Mysql2::Client.new",
                                                                     holds_the_loop: true) do |c|
      silent = TCPServer.new("127.0.0.1", 0) # the kernel accepts; nobody ever greets
      ticks = 0
      ticker = c.fiber { 30.times { sleep 0.01; ticks += 1 } }
      sleep 0.02
      before = ticks
      t = c.now
      assert_raises(Mysql2::Error) do
        Mysql2::Client.new(host: "127.0.0.1", port: silent.addr[1], username: "root", connect_timeout: 1, read_timeout: 1)
      end
      held = c.now - t
      assert_operator held, :>=, 0.5, "connect to a silent peer gave up after #{held.round(2)} s"
      assert_operator ticks - before, :<=, 1, "other fibers ran during the connect: it did not block"
      ticker.value
      if c.farce?
        long = c.stalls.select { |r| r.duration >= 0.5 }
        refute_empty long, "no stall report of 0.5 s or more for the connect (got #{c.stalls.map(&:duration)})"
        c.note("stall report at #{long.first.location}")
      end
      silent.close
    end
  end
end
