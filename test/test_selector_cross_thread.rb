# frozen_string_literal: true

require_relative "test_helper"

# The io-event selector's cross-thread contract (docs/contracts.md): push
# and wakeup work from any thread, as io-event's own selectors' do. Async's
# Scheduler#unblock calls `selector.push(fiber); selector.wakeup` from the
# thread that unblocks (a Thread::Queue#push, Thread#value, a Mutex released
# by a plain thread), and #interrupt calls wakeup. A select blocked in the
# kernel must be woken, and the pushed fiber must run at the loop's next
# select, wherever the loop was when the other thread came (in the kernel,
# or still before it). The operations only the loop's thread may call still
# raise Farce::Error from another thread.
#
# Farce::IOEventSelector is used directly (no io-event needed), on the
# backend FARCE_BACKEND names, as `rake test` runs every file per backend.
class TestSelectorCrossThread < Minitest::Test
  # A long select: returning well before it means a wakeup ended it.
  LONG = 5.0

  # What a fiber pushed from another thread must do: run once, then give
  # the loop fiber back, as Async's fibers do.
  class Pushed
    attr_reader :runs

    def initialize(loop_fiber)
      @runs = 0
      @fiber = Fiber.new do
        loop do
          @runs += 1
          loop_fiber.transfer
        end
      end
    end

    def alive? = @fiber.alive?
    def transfer = @fiber.transfer
  end

  def setup
    skip_on_ruby_loop("has no io-event selector: the selector is the native core's only")
    @loop = Fiber.current
    @selector = Farce::IOEventSelector.new(@loop)
  end

  def teardown
    @selector&.close
  end

  # Selects until pushed ran (at most 3 selects: the one a wakeup ends
  # runs the ready list at its start only); returns the seconds it took.
  def select_until_run(pushed, timeout: LONG)
    t0 = monotonic
    3.times do
      break if pushed.runs.positive?

      @selector.select(timeout)
    end
    monotonic - t0
  end

  # io-event's "#wakeup doesn't block when readying another fiber", with a
  # real fiber: the other thread pushes at 0 to 9 ms, before the loop's
  # select reaches the kernel or while it waits there.
  def test_push_and_wakeup_from_another_thread_end_a_blocking_select
    @selector.select(0) # starts nothing: a select that has to wait starts the core
    10.times do |i|
      pushed = Pushed.new(@loop)
      thread = Thread.new do
        sleep(i / 1000.0)
        @selector.push(pushed)
        @selector.wakeup
      end
      took = select_until_run(pushed)
      assert_includes [true, false], thread.value # Thread#value re-raises what push or wakeup raised
      assert_equal 1, pushed.runs, "round #{i}: the pushed fiber did not run"
      # a hang check, not a speed check: without the wakeup this is LONG * 3
      assert_operator took, :<, LONG, "round #{i}: the select slept through the wakeup"
    end
  end

  # The other thread is done (push and wakeup both happened while the loop's
  # thread was not selecting: wakeup answers false) before the loop selects:
  # the select must not sleep, the pushed fiber runs in it.
  def test_a_push_from_another_thread_before_select_runs_at_the_next_select
    @selector.select(0.001) # the core is up: a later select could sleep in the kernel
    pushed = Pushed.new(@loop)
    woke = Thread.new do
      @selector.push(pushed)
      @selector.wakeup
    end.value
    assert_equal false, woke, "wakeup is true only while the loop waits in the kernel"
    assert @selector.ready?
    took = select_until_run(pushed)
    assert_equal 1, pushed.runs
    assert_operator took, :<, LONG
  end

  # Async's FiberInterrupt (fiber_interrupt from another thread) is pushed
  # the same way: any object answering alive? and transfer.
  def test_push_accepts_any_object_that_answers_alive_and_transfer_from_another_thread
    ran = []
    loop_fiber = @loop
    fake = Object.new
    fake.define_singleton_method(:alive?) { true }
    fake.define_singleton_method(:transfer) { ran << Thread.current }
    Thread.new { @selector.push(fake) }.join
    @selector.select(0)
    assert_equal [Thread.current], ran, "the loop's thread runs it, at its select"
    assert_same loop_fiber, Fiber.current
  end

  # A selector closed meanwhile (Async reads @selector, then the loop's
  # thread closes it): push and wakeup from another thread do nothing, as
  # io-event's never raise.
  def test_push_and_wakeup_from_another_thread_on_a_closed_selector_do_nothing
    @selector.select(0.001)
    @selector.close
    result = Thread.new { [@selector.push(Pushed.new(@loop)), @selector.wakeup] }.value
    assert_equal [nil, false], result
  end

  # What only the loop's thread may do still raises from another thread,
  # while the loop is busy (here: parked in its kernel wait) and after.
  def test_select_io_wait_and_resume_from_another_thread_raise
    r, w = IO.pipe
    errors = Queue.new
    other = Thread.new do
      sleep 0.01 until @in_select
      sleep 0.05 # the loop's thread is in its kernel wait by now, or soon
      { select: -> { @selector.select(0) },
        io_wait: -> { @selector.io_wait(Fiber.current, r, IO::READABLE) },
        yield: -> { @selector.yield },
        resume: -> { @selector.resume(Fiber.new {}) } }.each do |name, call|
        call.call
        errors << [name, :returned]
      rescue Farce::Error => e
        errors << [name, e.message]
      rescue StandardError => e
        errors << [name, e.class]
      end
      @selector.push(Pushed.new(@loop)) # allowed: ends the select below
      @selector.wakeup
    end
    waiter = Fiber.new do
      @selector.io_wait(waiter, r, IO::READABLE)
      @loop.transfer
    end
    waiter.transfer
    @in_select = true
    3.times { @selector.select(LONG) if other.alive? }
    other.join
    results = 4.times.map { errors.pop }.to_h
    results.each do |name, message|
      assert_kind_of String, message, "#{name} from another thread: #{message.inspect}"
      assert_match(/belongs to/, message, name.to_s)
      assert_match(/push and wakeup/, message, "#{name}: the message lists what may be called from anywhere")
    end
  ensure
    r&.close
    w&.close
  end
end
