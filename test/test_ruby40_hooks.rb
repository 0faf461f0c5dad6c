# frozen_string_literal: true

require_relative "test_helper"

# Ruby 4.0's fiber_interrupt, yield and io_close. No Ruby on this machine
# calls them yet, so the tests call the hooks directly, as Ruby 4.0 will.
class TestRuby40Hooks < Minitest::Test
  def test_fiber_interrupt_raises_in_a_fiber_blocked_on_a_read
    error = nil
    elapsed = nil
    farce do
      r, _w = IO.pipe
      reader = Fiber.schedule do
        r.read(1)
      rescue IOError => e
        error = e
      end
      t = monotonic
      Fiber.scheduler.fiber_interrupt(reader, IOError.new("stream closed in another thread"))
      sleep 0.001 until error || monotonic - t > 2
      elapsed = monotonic - t
      assert_equal 0, Fiber.scheduler.stats[:pending_waits], "the interrupted wait must be cancelled"
    end
    assert_equal "stream closed in another thread", error.message
    assert_operator elapsed, :<, 0.04
  end

  def test_fiber_interrupt_from_another_thread_wakes_the_loop
    error = nil
    t = nil
    farce do
      sleeper = Fiber.schedule do
        sleep 10
      rescue RuntimeError => e
        error = e
      end
      t = monotonic
      scheduler = Fiber.scheduler
      Thread.new { sleep 0.02; scheduler.fiber_interrupt(sleeper, RuntimeError) }.join
    end
    assert_kind_of RuntimeError, error
    assert_operator monotonic - t, :<, 1
  end

  def test_fiber_interrupt_of_a_finished_fiber_or_the_current_one
    farce do
      done = Fiber.schedule { :done }
      assert_nil Fiber.scheduler.fiber_interrupt(done, RuntimeError)
      assert_raises(ArgumentError) { Fiber.scheduler.fiber_interrupt(Fiber.current, ArgumentError.new("self")) }
      assert_raises(TypeError) { Fiber.scheduler.fiber_interrupt(:not_a_fiber, RuntimeError) }
    end
  end

  def test_fiber_interrupt_in_a_fiber_waiting_on_a_queue
    got = nil
    farce do
      q = Queue.new
      waiter = Fiber.schedule do
        q.pop
      rescue Interrupt => e
        got = e
      end
      Fiber.scheduler.fiber_interrupt(waiter, Interrupt.new("stop"))
      sleep 0.01
      q << :late # nobody waits any more
    end
    assert_equal "stop", got.message
  end

  # An interrupt queued while the fiber's wait had already finished (here a
  # turn given inside io_wait, where an IO#close in another fiber finds it
  # on Ruby 4.0) is raised at that wait. Queued until after the loop had
  # resumed the fiber, it was raised into the next thing the fiber waited
  # on: a `sleep` after the wait raised "stream closed in another thread".
  def test_an_interrupt_is_raised_at_the_wait_it_was_queued_during
    first = later = nil
    Farce.run(backend: backend, turn_budget: 0.0005) do
      r, w = IO.pipe
      w.write("x")
      waiter = Fiber.current
      Fiber.schedule do
        sleep 0 # ready: runs in the turn the wait below gives, ahead of the waiter
        Fiber.scheduler.fiber_interrupt(waiter, RuntimeError.new("for the first wait"))
      end
      t = monotonic
      nil while monotonic - t < 0.003 # past the turn budget, without a hook: the wait gives a turn first
      first = outcome { r.wait_readable(0.5) && :readable }
      later = outcome { sleep(0.02) && :slept }
      r.close
      w.close
    end
    assert_equal ["for the first wait", :slept], [first, later]
  end

  # The same for a wait that finished by itself: sleep 0 is ready at the
  # next iteration, and the Ruby loop resumed it there before it delivered
  # the interrupt, which then went into the fiber's next sleep.
  def test_an_interrupt_for_a_finished_sleep_is_raised_at_that_sleep
    assert_equal ["for the first wait", :slept], sleeps_interrupted_by(0, "for the first wait")
  end

  # Two interrupts queued while a fiber is parked in one wait (an
  # application's own fiber_interrupt beside an IO#close's, say): the first
  # ends the wait, and the second, for the same wait, must not be raised
  # into the next one. The first test has the fiber parked in a sleep that is not
  # over; the second in one that finished in the same iteration.
  def test_a_second_interrupt_for_the_same_wait_is_dropped
    assert_equal ["one", :slept], sleeps_interrupted_by(5, "one", "two")
  end

  def test_a_second_interrupt_for_a_finished_wait_is_dropped
    assert_equal ["one", :slept], sleeps_interrupted_by(0, "one", "two")
  end

  # A fiber sleeps first_sleep, then 0.02 s; the interrupts (RuntimeErrors
  # with these messages) are queued for it right after it first parks.
  # Returns the outcome of each of its two sleeps.
  def sleeps_interrupted_by(first_sleep, *messages)
    first = later = nil
    farce do
      target = Fiber.schedule do
        first = outcome { sleep(first_sleep) && :slept }
        later = outcome { sleep(0.02) && :slept }
      end
      messages.each { |m| Fiber.scheduler.fiber_interrupt(target, RuntimeError.new(m)) }
    end
    [first, later]
  end

  # What the block returns, or the message of the RuntimeError raised into it.
  def outcome
    yield
  rescue RuntimeError => e
    e.message
  end

  def test_yield_lets_every_other_fiber_run_first
    order = []
    # no turns: the order below needs the spawner to hold the loop between
    # its two Fiber.schedule calls (a loaded machine can spend a turn
    # budget there, and the turn would run a's next step first)
    farce(turn_budget: nil) do
      Fiber.schedule { 3.times { |i| order << "a#{i}"; Fiber.scheduler.yield } }
      Fiber.schedule { 3.times { |i| order << "b#{i}"; Fiber.scheduler.yield } }
    end
    assert_equal %w[a0 b0 a1 b1 a2 b2], order
  end

  def test_yield_is_not_ended_by_unblock
    farce do
      me = Fiber.current
      Fiber.schedule { Fiber.scheduler.unblock(nil, me) }
      assert_nil Fiber.scheduler.yield
    end
  end

  def test_io_close_wakes_waiters_with_ioerror_at_once
    errors = []
    # No turns (turn_budget: nil): both readers must be parked on the pipe
    # when io_close comes. With the default budget of 0.5 ms, the Ruby
    # loop on a busy machine can end a reader's turn inside its io_read,
    # before it waits; that reader is no waiter of the descriptor yet, and
    # nothing here wakes it (CI's Ruby 3.2 and 3.3 runs on the Ruby loop
    # each saw one waiter of two; there a budget of 1e-9 fails every time).
    farce(turn_budget: nil) do
      r, w = IO.pipe
      2.times do
        Fiber.schedule do
          r.read(1)
        rescue IOError => e
          errors << e
        end
      end
      fd = r.fileno
      assert_nil Fiber.scheduler.io_close(fd), "Ruby closes the descriptor itself"
      # At once means within a few turns of the loop, not at the 50 ms close
      # scan. Turns are counted, not time (a collection or a busy machine can
      # hold one turn past 20 ms), and more than one turn is allowed because
      # on io_uring the cancelled reads complete in the kernel after the poll
      # that submits their cancellation (main failed 84 of 300 times with a
      # single 2 ms sleep and two busy CPUs). Twenty 1 ms turns on a quiet
      # machine still end before the scan, so a wake left to it fails here.
      turns = 0
      until errors.size == 2 || turns == 20
        sleep 0.001
        turns += 1
      end
      assert_equal 2, errors.size, "waiters woken after #{turns} turns of the loop"
      refute r.closed?
      r.close
      w.close
    end
  end

  def test_io_close_with_an_io_object
    error = nil
    farce do
      a, b = UNIXSocket.pair
      Fiber.schedule do
        a.wait_readable
      rescue IOError => e
        error = e
      end
      Fiber.scheduler.io_close(a)
      sleep 0.002
      a.close
      b.close
    end
    assert_kind_of IOError, error
  end

  def test_io_close_of_an_unknown_descriptor_is_harmless
    farce do
      r, w = IO.pipe
      assert_nil Fiber.scheduler.io_close(w.fileno)
      assert_nil Fiber.scheduler.io_close(10_000)
      w.write("x")
      assert_equal "x", r.read(1)
    end
  end
end
