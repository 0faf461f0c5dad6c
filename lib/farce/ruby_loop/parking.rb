# frozen_string_literal: true

module Farce
  class RubyLoop
    # Parking: a fiber's Wait from registration (park) through ready (make_ready) to finished.

    private

    # Parks the current fiber until the loop resumes it; returns what the
    # loop passed (events, :timed_out, :woken, :closed). An exception raised
    # into the fiber meanwhile cancels the wait and propagates; a resume by
    # someone other than the loop is a spurious wakeup (:woken). `duration`:
    # seconds before :timed_out (nil: none; 0: resumed at the next iteration,
    # as kernel_sleep(0) and yield are; :after_poll: resumed behind what the
    # next poll makes ready, a turn's).
    def park(wait, duration = nil)
      unless parkable? # rubocop:disable Style/GuardClause
        raise Farce::Error, "Farce::Scheduler#block called from a fiber that cannot wait in it (a blocking fiber, " \
                            "e.g. the thread's root fiber, or one resumed inside another fiber's turn, e.g. " \
                            "Enumerator#next's): call it from a fiber the scheduler runs (Fiber.schedule)"
      end
      @waits[wait.fiber] = wait
      @parked += 1
      # after the registration: an unblock from now on finds the wait
      early = wait.unblockable && !@early_unblocks.empty? && @early_unblocks.delete(wait.fiber)
      if duration == 0 || duration == :after_poll || early
        wait.state = :ready
        @ready_waits += 1
        wait.ready_at = monotonic if @wakeups_kept
        (duration == :after_poll && !early ? @yielded : @ready) << [wait, :woken]
      elsif duration
        wait.timer = @timers.add(monotonic + duration, wait)
      end
      resumed = false
      begin
        take_held_raise(ending_turn: true)
        value = Fiber.yield
        resumed = true
      ensure
        # an exception raised into the fiber, or Fiber#kill (Ruby 3.3+),
        # which unwinds past any rescue: cancel the wait, let it propagate
        finish(wait) unless resumed
      end
      return value if wait.state == :finished

      finish(wait)
      :woken
    end

    def make_ready(wait, value)
      return unless wait.state == :parked

      wait.state = :ready
      @ready_waits += 1
      wait.ready_at = monotonic if @wakeups_kept
      detach(wait)
      @ready << [wait, value]
    end

    def finish(wait)
      return if wait.state == :finished

      @ready_waits -= 1 if wait.state == :ready
      wait.state = :finished
      detach(wait)
      @waits.delete(wait.fiber) if @waits[wait.fiber].equal?(wait)
      @parked -= 1
    end

    def detach(wait)
      @timers.cancel(wait.timer) if wait.timer
      wait.timer = nil
      return unless wait.io

      list = @io_waits[wait.io]
      return unless list

      list.delete(wait)
      @io_waits.delete(wait.io) if list.empty?
    end
  end
end
