# frozen_string_literal: true

require "minitest/autorun"
require "rbconfig"
# bench/ is part of a checkout, not of the test tree made beside an installed gem.
BENCH_RUNNER = File.expand_path("../bench/runner.rb", __dir__) unless defined?(BENCH_RUNNER)
require BENCH_RUNNER if File.exist?(BENCH_RUNNER)

# How the HTTP rows count the server's collections: bench/http_hello.rb
# answers a "gc" line on its stdin, the runner asks at each end of the
# measured window and reads the answers after the run (bench/runner/running.rb,
# ask_gc and read_gc), and gc_per_request turns two answers into collections
# and milliseconds per 1,000 requests. The server is the real one, run with
# threads (no scheduler needed), so a changed answer or a server that stops
# answering fails here.
class TestBenchServerGc < Minitest::Test
  HELLO = File.expand_path("../bench/http_hello.rb", __dir__)

  def setup
    skip "#{BENCH_RUNNER} is not here: no checkout of the repository" unless defined?(Bench::Runner)
    @runner = Bench::Runner.new
  end

  def with_server
    io = IO.popen([RbConfig.ruby, HELLO, "threads", "0"], "r+", err: File::NULL)
    ready = IO.select([io], nil, nil, 30) && io.gets
    assert_match(/\AREADY \d+ /, ready.to_s)
    yield io
  ensure
    io.close if io && !io.closed? # a pipe's close waits for the server to end
  end

  def test_the_server_answers_each_gc_line_and_still_stops_on_eof
    with_server do |io|
      assert @runner.send(:ask_gc, io)
      assert @runner.send(:ask_gc, io)
      first = @runner.send(:read_gc, io)
      second = @runner.send(:read_gc, io)
      refute_nil first
      refute_nil second
      assert_kind_of Integer, first[:minor]
      assert_kind_of Integer, first[:major]
      assert_operator second[:minor] + second[:major], :>=, first[:minor] + first[:major]
      io.close_write
      assert IO.select([io], nil, nil, 10), "the server did not stop on stdin EOF"
      assert_nil io.gets
      refute @runner.send(:ask_gc, io), "asking a server whose stdin is closed answers false"
    end
  end

  def test_collections_and_their_time_per_1000_requests
    before = { minor: 10, major: 1, ms: 5.0 }
    after = { minor: 40, major: 2, ms: 35.0 }
    assert_equal({ "gc_per_1k_requests" => 3.1, "gc_ms_per_1k_requests" => 3.0 },
                 @runner.send(:gc_per_request, before, after, 10_000))
    # a Ruby that keeps no GC time: the count alone
    assert_equal({ "gc_per_1k_requests" => 3.1 },
                 @runner.send(:gc_per_request, before.merge(ms: nil), after.merge(ms: nil), 10_000))
    # an answer missing, or no requests: no figure rather than a wrong one
    assert_empty @runner.send(:gc_per_request, nil, after, 10_000)
    assert_empty @runner.send(:gc_per_request, before, after, 0)
  end

  def test_an_answer_that_is_not_a_gc_line_is_none
    r, w = IO.pipe
    w.puts "READY 1 3.3.0 1 1"
    assert_nil @runner.send(:read_gc, r)
    w.puts "GC 3 1 -"
    assert_equal({ minor: 3, major: 1, ms: nil }, @runner.send(:read_gc, r))
    w.puts "GC x 1 2"
    assert_nil @runner.send(:read_gc, r)
  ensure
    [r, w].each { |x| x&.close }
  end
end
