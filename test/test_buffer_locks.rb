# frozen_string_literal: true

require_relative "test_helper"
require "tempfile"

# A hook holds the IO::Buffer it was handed while the kernel may use its
# memory, and gives the hold back on every way out: a return, an exception
# (Timeout, Fiber#raise), Fiber#kill, and a completion operation (io_uring)
# that is reaped only after the cancel. Ruby 4.1 counts locks and ends the
# process when a hook returns holding one (ruby/ruby#18429); before, a
# buffer left locked can never be resized or freed. So each test checks
# `locked?` once the hook is done, and that the buffer can be resized.
#
# The waits are those of the version 1-3 hooks (Ruby 4.0 and older): a
# version 4 hook never waits (test_single_transfer_hooks.rb checks its
# holds).
class TestBufferLocks < Minitest::Test
  EXTRA = RUBY_VERSION >= "3.2" ? [0] : [] # io_read's offset argument (3.2+)

  def setup
    Warning[:experimental] = false # IO::Buffer's warning
  end

  def skip_on_single_transfer_hooks
    skip "this Ruby's io_read never waits (scheduler interface version 4)" if Farce::SINGLE_TRANSFER_HOOKS
  end

  # Parks a fiber in io_read on an empty pipe, lets `interrupt` end its
  # wait from another fiber, and returns [buffer, what the reader raised].
  def read_interrupted(&interrupt)
    buffer = IO::Buffer.new(16)
    raised = nil
    farce do
      r, w = IO.pipe
      reader = Fiber.schedule do
        Fiber.scheduler.io_read(r, buffer, 1, *EXTRA)
      rescue Exception => e # rubocop:disable Lint/RescueException -- what the reader saw is the result
        raised = e
        raise unless e.is_a?(StandardError)
      end
      interrupt.call(reader, buffer)
      w.close
    end
    [buffer, raised]
  end

  def assert_released(buffer)
    refute buffer.locked?, "the hook gave its hold back"
    buffer.resize(32) # raises LockedError if anybody still holds it
  end

  def test_timeout_in_a_read
    skip_on_single_transfer_hooks
    buffer = IO::Buffer.new(16)
    error = nil
    farce do
      r, _w = IO.pipe
      Fiber.schedule do
        Timeout.timeout(0.05) { Fiber.scheduler.io_read(r, buffer, 1, *EXTRA) }
      rescue Timeout::Error => e
        error = e
      end
    end
    assert_kind_of Timeout::Error, error
    assert_released buffer
  end

  def test_fiber_raise_in_a_read
    skip_on_single_transfer_hooks
    buffer, raised = read_interrupted { |reader, _| reader.raise(ArgumentError, "stop") }
    assert_kind_of ArgumentError, raised
    assert_released buffer
  end

  def test_fiber_kill_in_a_read
    skip_on_single_transfer_hooks
    skip "Fiber#kill is Ruby 3.3+" unless Fiber.method_defined?(:kill)
    buffer, = read_interrupted { |reader, _| reader.kill }
    assert_released buffer
  end

  # On io_uring the read is a completion operation on the buffer's memory:
  # the hold lasts until its completion is reaped, past the exception that
  # cancelled it, and no longer.
  def test_completion_operation_holds_until_reaped
    skip_on_single_transfer_hooks
    skip_on_ruby_loop("has no completion operations")
    skip "needs io_uring (FARCE_BACKEND=io_uring or auto)" unless %i[auto io_uring].include?(backend) && backend_available?(:io_uring)
    held_while_parked = nil
    buffer, raised = read_interrupted do |reader, buf|
      held_while_parked = Fiber.scheduler.backend == :io_uring ? buf.locked? : :not_io_uring
      reader.raise(ArgumentError, "stop")
    end
    skip "auto picked another backend" if held_while_parked == :not_io_uring
    assert held_while_parked, "the buffer is held while the kernel owns it"
    assert_kind_of ArgumentError, raised
    assert_released buffer
  end

  def test_exception_in_a_positional_read
    skip "io_pread is Ruby 3.3+ and the native extension's" unless Farce::Native.loaded?
    buffer = IO::Buffer.new(8)
    Tempfile.create("farce") do |file|
      file.write("abc")
      file.flush
      farce do
        # not an IO: raises in the worker, after the hold was taken
        assert_raises(TypeError) { Fiber.scheduler.io_pread(Object.new, buffer, 0, 1, 0) }
        if Farce::SINGLE_TRANSFER_HOOKS
          assert_equal 3, Fiber.scheduler.io_pread(file, buffer, 0, 0, 8)
        else
          assert_equal 3, Fiber.scheduler.io_pread(file, buffer, 0, 1, 0)
        end
      end
    end
    assert_released buffer
  end

  # io_pread's transfer runs on a worker thread, on the caller's buffer.
  # Fiber#kill is no exception (the job's wait cannot rescue it): the
  # waiting fiber must still not leave the hook before the job is done with
  # the buffer, or Ruby frees (4.1: rb_bug, the worker's hold still taken)
  # memory the worker is writing to.
  def test_fiber_kill_while_a_positional_read_waits_for_its_worker
    skip "Fiber#kill is Ruby 3.3+" unless Fiber.method_defined?(:kill)
    skip "io_pread is the native extension's" unless Farce::Native.loaded?
    buffer = IO::Buffer.new(8)
    seen = nil
    Tempfile.create("farce") do |file|
      file.write("abc")
      file.flush
      farce(worker_threads: 1) do
        scheduler = Fiber.scheduler
        gate = Thread::Queue.new
        # the only worker is busy until the gate opens: the read's job waits behind it
        Fiber.schedule { scheduler.worker_pool.run(-> { gate.pop }) }
        reader = Fiber.schedule do
          if Farce::SINGLE_TRANSFER_HOOKS
            scheduler.io_pread(file, buffer, 0, 0, 3)
          else
            scheduler.io_pread(file, buffer, 0, 3, 0)
          end
        ensure
          seen = buffer.get_string(0, 3) # what the job had done when the hook was left
        end
        # the gate opens from another thread: the killed fiber may wait for
        # its job with this thread (Fiber#kill resumed it inside this turn)
        Thread.new { sleep 0.05; gate << :open }
        reader.kill
      end
    end
    assert_equal "abc", seen, "the hook was left only once its job was done"
    assert_released buffer
  end

  # A buffer its owner locked: the hook takes its own hold next to the
  # owner's where locks are counted (Ruby 4.1), none where a lock is one flag
  # (it cannot be taken twice), and leaves the owner's in place either way.
  def test_a_buffer_its_owner_locked_stays_locked_by_its_owner
    skip_on_single_transfer_hooks
    buffer = IO::Buffer.new(16)
    farce do
      r, w = IO.pipe
      buffer.locked do
        Fiber.schedule { w.write("hi") }
        assert_equal 2, Fiber.scheduler.io_read(r, buffer, 2, *EXTRA)
        assert buffer.locked?
      end
    end
    assert_released buffer
  end
end
