# frozen_string_literal: true

module Farce
  # Raised into a fiber that is still parked when its scheduler's run ends
  # abnormally (Farce.run's block raised, Thread#kill, an abandon). Not a
  # StandardError, so `rescue => e` does not catch it; the wrapper
  # Scheduler#fiber puts around every fiber swallows it.
  class Unwind < Exception # rubocop:disable Lint/InheritException
    def initialize(message = "the scheduler's run ended: this fiber is unwound")
      super
    end
  end

  # Unwinding the fibers a scheduler leaves parked (Scheduler#abandon).
  #
  # Why: a fiber parked in Mutex#lock, Queue#pop or ConditionVariable#wait
  # sits in that object's wait queue. Left there, it outlives its thread,
  # and the next unlock or push wakes a fiber of a dead thread: Ruby aborts
  # with "[BUG] unexpected THREAD_KILLED". Unwinding it runs Ruby's own
  # cleanup, which takes it out of the queue, and the fiber's ensure
  # clauses, while the loop still works.
  #
  # How: in rounds. Each round unwinds every fiber still parked, then runs
  # the loop without waiting for as long as that resumes fibers (at most
  # UNWIND_TURNS iterations), so that what the ensure clauses started (a
  # `sleep 0`, a write, a wait for a descriptor that is ready) finishes.
  # One iteration was not enough: a fiber resumed in it that waited for
  # the loop once more (a `sleep 0` after a turn its write gave, or after
  # its own `sleep 0`; Ruby 3.1's puts waits for writability) was still
  # parked when the next round began, and that round raised into it mid-way
  # (a lost line, a line without its newline). The first rounds raise Farce::Unwind:
  # an ensure clause may then wait (Fiber#kill would kill the fiber again at
  # every resume, cutting any ensure that waits short). The last rounds use
  # Fiber#kill where Ruby has it (3.3+), which no `rescue Exception` stops.
  # What is still parked after the last round is abandoned.
  #
  # No turns are given while fibers unwind (the turn budget is off): only
  # the unwinding's own iterations run between two steps of an ensure
  # clause, and a turn would only spend one of them. A loaded machine gave
  # them at random: the fiber preempted for longer than the budget between
  # being unwound and its first write (the unwinding switches to it without
  # starting a turn, so the clock ran from the fiber's last one). The
  # scheduler is released when the unwinding is done: the budget is not
  # restored.
  module Unwinding
    UNWIND_ROUNDS = 4
    # Rounds that raise Farce::Unwind before Fiber#kill takes over.
    RAISE_ROUNDS = 2
    # Loop iterations at most after each round: enough for any ensure
    # clause that only waits for what is ready, and a bound for one that
    # never stops yielding (`loop { sleep 0 }`).
    UNWIND_TURNS = 64

    KILL = Fiber.method_defined?(:kill)

    private

    # Unwinds every fiber parked in this scheduler's waits, on the loop's
    # thread (elsewhere there is nothing to do: only that thread may resume
    # them). Exceptions the fibers raise while they unwind are dropped: the
    # exception that ended the run is the one that propagates.
    def unwind_parked_fibers
      # a `while`, not `times` with `break`: a break out of a block clears $!,
      # which is the thread's exception when Ruby closes the scheduler at
      # its exit (Scheduler#scheduler_close)
      round = 0
      while round < UNWIND_ROUNDS
        fibers = __parked_fibers
        break if fibers.empty?

        # here, not before the loop: only on the loop's thread are any listed
        self.__turn_budget = nil if round.zero?
        kill = KILL && round >= RAISE_ROUNDS
        fibers.each { |fiber| unwind_fiber(fiber, kill) }
        # what the unwound fibers' ensure clauses made ready, and the
        # completions of the operations they cancelled (io_uring: a fiber
        # leaves an operation only once the kernel let go of its buffer)
        unwind_turns
        round += 1
      end
      nil
    end

    # The loop's iterations without waiting, until one resumes nothing.
    def unwind_turns
      turns = 0
      while turns < UNWIND_TURNS
        turns += 1
        # a fiber that raised out of its resume did run: go on
        break unless unwind_quietly(true) { __unwind_turn }
      end
      nil
    end

    def unwind_fiber(fiber, kill)
      return unless fiber.alive?

      unwind_quietly { kill ? fiber.kill : fiber.raise(Unwind) }
    end

    # The block's value, or on_error when it raised.
    def unwind_quietly(on_error = nil)
      yield
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise if e.is_a?(SignalException) # an INT trap's Interrupt is the thread's, not the fiber's

      on_error # an ensure clause's error while unwinding: the run's own exception wins
    end
  end
end
