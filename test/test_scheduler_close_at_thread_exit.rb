# frozen_string_literal: true

require_relative "test_helper"

# Ruby calls the scheduler's scheduler_close when the thread that set it
# exits. Its contract here, as Async's Scheduler#scheduler_close has it
# (docs/contracts.md):
#
# - the thread ends normally: every fiber runs to its end first;
# - the thread ends with an exception: the fibers are not run (one parked
#   for good would keep the thread from ever ending, and its exception from
#   being reported): those still parked are unwound, their ensure clauses
#   run, the core is freed, and Thread#join raises the thread's exception.
#   Ruby's TestFiberMutex#test_mutex_deadlock hung this way with a fiber
#   parked inside Mutex#synchronize;
# - a fiber raises while they run: the rest are unwound and the core freed
#   before the exception propagates (nobody closes the scheduler after
#   this: at thread exit the io_uring ring and the wake descriptor leaked).
class TestSchedulerCloseAtThreadExit < Minitest::Test
  def test_a_thread_that_raises_is_not_kept_by_a_fiber_parked_for_good
    mutex = Thread::Mutex.new
    unwound = false
    scheduler = nil
    thread = Thread.new do
      Thread.current.report_on_exception = false
      scheduler = Farce::Scheduler.new(backend: backend)
      Fiber.set_scheduler(scheduler)
      Fiber.schedule do
        mutex.synchronize { sleep } # parked for good, holding the mutex
      ensure
        unwound = true
      end
      # Ruby 3.2+ raises "deadlock; lock already owned by another fiber" from
      # mutex.lock here (test_mutex_deadlock); 3.1 sleeps for ever: raise instead
      raise ArgumentError, "the thread's own exception"
    end
    error = assert_raises(ArgumentError) do # Thread#join re-raises the thread's exception
      thread.join(10) or flunk "the thread did not end: its scheduler ran a fiber parked for good"
    end
    assert_equal "the thread's own exception", error.message
    # Ruby 3.1 does not close the scheduler of a thread that raised: the
    # fibers are left as they are
    return if RUBY_VERSION < "3.2"

    assert unwound, "the parked fiber's ensure clause did not run"
    assert scheduler.closed?
    refute mutex.locked?, "the unwound fiber left the mutex locked"
  end

  def test_a_fiber_raising_at_thread_exit_leaves_no_descriptor_open
    skip "no /proc/self/fd" unless File.directory?("/proc/self/fd")
    # the first scheduler of a process loads the core: not counted
    Thread.new { Fiber.set_scheduler(Farce::Scheduler.new(backend: backend)) }.join
    before = open_descriptors
    other_ran = false
    scheduler = nil
    thread = Thread.new do
      Thread.current.report_on_exception = false
      scheduler = Farce::Scheduler.new(backend: backend)
      Fiber.set_scheduler(scheduler)
      Fiber.schedule { sleep 0.01; raise IOError, "from a fiber at exit" }
      Fiber.schedule do
        sleep
      ensure
        other_ran = true
      end
    end
    error = assert_raises(IOError) { thread.join(10) or flunk "the thread did not end" }
    assert_equal "from a fiber at exit", error.message
    assert scheduler.closed?, "the scheduler was left open"
    assert other_ran, "the fiber still parked was not unwound"
    assert_no_descriptor_left_open(before, "the scheduler closed at thread exit (the core's ring, its wake descriptor)")
  end

  def test_a_thread_that_ends_normally_still_runs_every_fiber
    done = []
    Thread.new do
      Fiber.set_scheduler(Farce::Scheduler.new(backend: backend))
      3.times { |i| Fiber.schedule { sleep 0.01 * i; done << i } }
    end.join(10)
    assert_equal [0, 1, 2], done
  end
end
