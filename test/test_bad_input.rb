# frozen_string_literal: true

require_relative "test_helper"

# Every public method and hook called with wrong types, closed IOs, negative
# or huge timeouts, nil, huge lengths, foreign fibers and after close: each
# must raise a Ruby exception with a useful message, never crash or hang.
class TestBadInput < Minitest::Test
  def setup
    @scheduler = Farce::Scheduler.new(backend: backend)
  end

  def teardown
    @scheduler.close unless @scheduler.closed?
  end

  def test_constructor_arguments
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: nil) }
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: "") }
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: Object.new) }
    assert_raises(ArgumentError) { Farce::Scheduler.new(nope: 1) }
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: "epoll\0x") }
  end

  def test_io_wait_wrong_arguments
    r, w = IO.pipe
    assert_raises(TypeError) { @scheduler.io_wait(nil, IO::READABLE, nil) }
    assert_raises(TypeError) { @scheduler.io_wait(42, IO::READABLE, nil) }
    assert_raises(TypeError) { @scheduler.io_wait(r, "x", nil) }
    assert_raises(ArgumentError) { @scheduler.io_wait(r, 0, nil) }
    assert_raises(ArgumentError) { @scheduler.io_wait(r, 1 << 20, nil) }
    assert_raises(ArgumentError) { @scheduler.io_wait(r, -1, nil) }
    assert_raises(ArgumentError) { @scheduler.io_wait(r, IO::READABLE, -1) }
    assert_raises(ArgumentError) { @scheduler.io_wait(r, IO::READABLE, Float::NAN) }
    assert_raises(TypeError) { @scheduler.io_wait(r, IO::READABLE, "1") }
    r.close
    assert_raises(IOError) { @scheduler.io_wait(r, IO::READABLE, 0) }
    w.close
  end

  def test_io_wait_huge_timeout_is_accepted
    farce do
      r, w = IO.pipe
      Fiber.schedule { w.write("x") }
      assert r.wait_readable(1e300)
      assert r.wait_readable(Float::INFINITY)
    end
  end

  def test_io_read_and_write_bad_buffers
    r, w = IO.pipe
    buffer = IO::Buffer.new(16)
    extra = RUBY_VERSION >= "3.2" ? [0] : []
    # a length or offset beyond the buffer: -EINVAL, as io-event's selectors answer
    einval = -Errno::EINVAL::Errno
    assert_equal einval, @scheduler.io_read(r, buffer, 17, *extra)
    assert_equal einval, @scheduler.io_write(w, buffer, 1 << 40, *extra)
    assert_raises(RangeError) { @scheduler.io_read(r, buffer, -1 << 70, *extra) }
    assert_raises(TypeError) { @scheduler.io_read(r, "not a buffer", 1, *extra) }
    assert_raises(TypeError) { @scheduler.io_write(w, nil, 1, *extra) }
    if RUBY_VERSION >= "3.2"
      assert_equal einval, @scheduler.io_read(r, buffer, 1, 16)
      assert_raises(RangeError) { @scheduler.io_read(r, buffer, 1, -1 << 70) }
    end
    r.close
    assert_raises(IOError) { @scheduler.io_read(r, buffer, 1, *extra) }
    w.close
  end

  def test_sleep_and_block_bad_durations
    assert_raises(ArgumentError) { @scheduler.kernel_sleep(-1) }
    assert_raises(TypeError) { @scheduler.kernel_sleep("1") }
    assert_raises(ArgumentError) { @scheduler.kernel_sleep(1, 2) }
    # a negative block timeout times out at once, as Queue#pop(timeout:)
    # does without a scheduler (test_negative_block_timeout.rb); NaN raises
    assert_equal false, @scheduler.block(:x, -5)
    assert_raises(ArgumentError) { @scheduler.block(:x, Float::NAN) }
    assert_raises(ArgumentError) { @scheduler.block }
  end

  def test_unblock_of_foreign_or_unknown_fibers_is_harmless
    assert_nil @scheduler.unblock(:nobody, Fiber.current)
    assert_nil @scheduler.unblock(nil, nil)
    assert_nil @scheduler.unblock(:x, Object.new)
    other = Farce::Scheduler.new(backend: backend)
    fiber = Fiber.new { :never }
    assert_nil other.unblock(:x, fiber)
    other.close
  end

  # A negative, NaN or enormous duration gets what Timeout gives it
  # without a scheduler (test_timeout_held_thread.rb's durations).
  def test_timeout_after_bad_arguments
    farce do
      assert_raises(TypeError) { Fiber.scheduler.timeout_after("soon", Timeout::Error, "x") { :ok } }
    end
  end

  def test_fiber_without_a_block
    assert_raises(ArgumentError) { @scheduler.fiber }
  end

  def test_everything_after_close
    @scheduler.close
    r, w = IO.pipe
    buffer = IO::Buffer.new(4)
    extra = RUBY_VERSION >= "3.2" ? [0] : []
    [
      -> { @scheduler.io_wait(r, IO::READABLE, 0) },
      -> { @scheduler.io_read(r, buffer, 1, *extra) },
      -> { @scheduler.io_write(w, buffer, 1, *extra) },
      -> { @scheduler.kernel_sleep(0) },
      -> { @scheduler.block(:x, 0) },
      -> { @scheduler.run },
      -> { @scheduler.stats }
    ].each { |call| assert_raises(Farce::Error, &call) }
    assert_nil @scheduler.unblock(:x, Fiber.current)
    assert @scheduler.closed?
    assert_nil @scheduler.close
    assert_kind_of Symbol, @scheduler.backend, "the backend stays readable after close"
    r.close
    w.close
  end

  def test_run_is_not_reentrant
    farce do
      error = assert_raises(Farce::Error) { Fiber.scheduler.run }
      assert_match(/blocking fiber|re-entrant|already running/, error.message)
    end
  end

  def test_private_internals_are_private
    assert_raises(NoMethodError) { @scheduler.__release }
    assert_raises(NoMethodError) { @scheduler.__alarm(Fiber.current, 1, RuntimeError, []) }
  end

  def test_hooks_called_outside_a_non_blocking_fiber_do_not_hang
    # A parking hook called from the root fiber has nowhere to yield to: it
    # must neither hang nor spin. kernel_sleep sleeps with
    # the thread, as Kernel#sleep does without a scheduler; block, which
    # only another fiber could end, raises Farce::Error.
    thread = Thread.new do
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      slept = @scheduler.kernel_sleep(0.05)
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
      blocked = begin
        @scheduler.block(Object.new, 0.01)
      rescue Farce::Error => e
        e.class
      end
      [slept, took, blocked]
    end
    assert thread.join(5), "hooks from the root fiber must not hang"
    slept, took, blocked = thread.value
    assert_equal true, slept
    assert_operator took, :>=, 0.04
    assert_equal Farce::Error, blocked
  end
end
