# frozen_string_literal: true

require_relative "test_helper"

# Scheduler#io_select: Ruby 3.2+ sends IO.select in a non-blocking fiber there.
class TestIOSelect < Minitest::Test
  def setup
    skip "IO.select reaches the scheduler (io_select) from Ruby 3.2; this is #{RUBY_VERSION}" if RUBY_VERSION < "3.2"
  end

  class Tracing < Farce::Scheduler
    def io_select(*arguments)
      (@selects ||= []) << arguments.size
      super
    end

    def selects = @selects || []
  end

  def traced
    scheduler = Tracing.new(backend: backend)
    Fiber.set_scheduler(scheduler)
    result = nil
    Fiber.schedule { result = yield }
    scheduler.run
    refute_empty scheduler.selects, "IO.select must go through the io_select hook"
    result
  ensure
    Fiber.set_scheduler(nil)
  end

  def test_pipes_with_mixed_readiness
    traced do
      r1, w1 = IO.pipe
      r2, w2 = IO.pipe
      w1.write("x")
      assert_equal [[r1], [w1, w2], []], IO.select([r1, r2], [w1, w2], [r1, r2], 1)
      assert_equal [[r1], [], []], IO.select([r2, r1])
      assert_equal [[], [w2], []], IO.select(nil, [w2])
    end
  end

  def test_sockets_with_mixed_readiness
    traced do
      a, b = UNIXSocket.pair
      server = TCPServer.new("127.0.0.1", 0)
      assert_nil IO.select([a, b, server], nil, nil, 0)
      client = TCPSocket.new("127.0.0.1", server.addr[1])
      b.write("hi")
      ready = IO.select([a, b, server], [client], nil, 1)
      # in the order asked, as Ruby's own IO.select answers; not by
      # descriptor: the GC may free a lower one for `server` than `a` got
      assert_equal [[a, server], [client], []], ready
      peer = server.accept
      assert_equal [[a], [], []], IO.select([a, b, server], nil, nil, 0)
      peer.write("y")
      assert_equal [[client], [], []], IO.select([client, b], nil, nil, 1)
    end
  end

  def test_only_the_calling_fiber_waits_and_a_write_wakes_it
    ticks = 0
    waited = nil
    result = traced do
      r, w = IO.pipe
      Fiber.schedule { 5.times { sleep 0.01; ticks += 1 }; w.write("go") }
      t = monotonic
      ready = IO.select([r])
      waited = monotonic - t
      ready
    end
    assert_equal 1, result[0].size
    assert_equal 5, ticks
    assert_operator waited, :>=, 0.04
  end

  def test_timeout_returns_nil_after_the_timeout
    ticks = 0
    elapsed = nil
    result = traced do
      r, _w = IO.pipe
      Fiber.schedule { 3.times { sleep 0.01; ticks += 1 } }
      t = monotonic
      IO.select([r], nil, nil, 0.08).tap { elapsed = monotonic - t }
    end
    assert_nil result
    assert_operator elapsed, :>=, 0.075
    assert_operator elapsed, :<, 0.5
    assert_equal 3, ticks
  end

  def test_zero_timeout_polls
    traced do
      r, w = IO.pipe
      assert_nil IO.select([r], nil, nil, 0)
      w.write("x")
      assert_equal [[r], [], []], IO.select([r], nil, nil, 0)
    end
  end

  def test_results_hold_the_callers_objects
    wrapper = Struct.new(:io) { def to_io = io }
    traced do
      r, w = IO.pipe
      rw = wrapper.new(r)
      ww = wrapper.new(w)
      w.write("x")
      ready = IO.select([rw], [ww])
      assert_same rw, ready[0][0]
      assert_same ww, ready[1][0]
    end
  end

  def test_buffered_input_counts_as_readable
    traced do
      r, w = IO.pipe
      w.write("one\ntwo\n")
      assert_equal "one\n", r.gets # "two\n" stays in Ruby's buffer, the pipe is empty
      assert_equal [[r], [], []], IO.select([r], nil, nil, 0)
    end
  end

  def test_errors_like_io_select
    traced do
      r, w = IO.pipe
      r.close
      assert_raises(IOError) { IO.select([r], nil, nil, 0) }
      assert_raises(TypeError) { IO.select([Object.new], nil, nil, 0) }
      assert_raises(ArgumentError) { IO.select([w], nil, nil, -1) }
    end
  end

  def test_an_io_closed_while_waited_on_raises_ioerror
    traced do
      r, _w = IO.pipe
      Fiber.schedule { sleep 0.02; r.close }
      assert_raises(IOError) { IO.select([r], nil, nil, 2) }
    end
  end

  def test_empty_sets_sleep_for_the_timeout
    traced do
      t = monotonic
      assert_nil IO.select(nil, nil, nil, 0.03)
      assert_operator monotonic - t, :>=, 0.025
    end
  end

  def test_timeout_timeout_interrupts_a_select
    traced do
      r, _w = IO.pipe
      assert_raises(Timeout::Error) { Timeout.timeout(0.03) { IO.select([r]) } }
      assert_equal 0, Fiber.scheduler.stats[:pending_waits], "the helper fibers' waits must be cancelled"
    end
  end

  def test_many_concurrent_selects
    count = 0
    traced do
      pipes = Array.new(50) { IO.pipe }
      pipes.each { |r, _| Fiber.schedule { count += 1 if IO.select([r], nil, nil, 2) } }
      pipes.each { |_, w| w.write("x") }
      sleep 0.05
    end
    assert_equal 50, count
  end
end
