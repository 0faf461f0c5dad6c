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
  # the loop once without waiting, so that what the ensure clauses started
  # (a short sleep, a write) finishes. The first rounds raise Farce::Unwind:
  # an ensure clause may then wait (Fiber#kill would kill the fiber again at
  # every resume, cutting any ensure that waits short). The last rounds use
  # Fiber#kill where Ruby has it (3.3+), which no `rescue Exception` stops.
  # What is still parked after the last round is abandoned.
  module Unwinding
    UNWIND_ROUNDS = 4
    # Rounds that raise Farce::Unwind before Fiber#kill takes over.
    RAISE_ROUNDS = 2

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

        kill = KILL && round >= RAISE_ROUNDS
        fibers.each { |fiber| unwind_fiber(fiber, kill) }
        # what the unwound fibers' ensure clauses made ready, and the
        # completions of the operations they cancelled (io_uring: a fiber
        # leaves an operation only once the kernel let go of its buffer)
        unwind_quietly { __unwind_turn }
        round += 1
      end
      nil
    end

    def unwind_fiber(fiber, kill)
      return unless fiber.alive?

      unwind_quietly { kill ? fiber.kill : fiber.raise(Unwind) }
    end

    def unwind_quietly
      yield
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise if e.is_a?(SignalException) # an INT trap's Interrupt is the thread's, not the fiber's

      nil # an ensure clause's error while unwinding: the run's own exception wins
    end
  end
end
