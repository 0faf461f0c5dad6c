# frozen_string_literal: true

module Farce
  class RubyLoop
    # Turns (the native loop's are in ext/farce/event_loop.c, the same rule): a fiber that holds the
    # loop past its budget gives it a turn; begin_turn/end_turn stamp each turn for stall detection.

    # Seconds a fiber may hold the loop before a hook that would not block
    # gives the loop a turn (nil: never); Scheduler.new(turn_budget:) sets it.
    attr_accessor :turn_budget

    # Called where a hook would go on without blocking (Fiber.schedule, a
    # read or write that moved data): past the budget, a fiber of ours
    # yields (the loop resumes it after one iteration); any other goes on.
    def turn_check
      if Thread.current != @thread
        # an idle loop moves to the thread that uses it (the native loop's
        # claim, so the stall watchdog samples that thread); Fiber.schedule
        # called by hand on another thread's busy scheduler gets no turn
        return nil if @running || @parked.positive?

        @thread = Thread.current
      end
      begin_turn(Fiber.current) if @stall_threshold && !@turn_active # see the native __turn_check
      budget = @turn_budget
      return nil unless budget && monotonic - @turn_started >= budget && !closed?

      # A fiber that cannot park gets no turn: the thread's own fiber outside
      # `run` never runs the loop itself (Ruby's order: scheduled fibers run
      # once the thread reaches run or close; see the native give_turn).
      if parkable?
        @turns_given += 1
        park(Wait.new(Fiber.current), :after_poll)
      end
      @turn_started = monotonic
      nil
    end

    # Fiber.schedule's first resume of a new fiber: its turn until it first
    # parks or ends (the native __start).
    def start(fiber)
      in_turn(fiber) { fiber.resume }
    end

    private

    def begin_turn(fiber)
      end_turn if @turn_active
      @turn_started = monotonic
      @turn_fiber = fiber
      @turn_seq += 1
      @turn_active = true
    end

    # The turn that just ended: reported if the watchdog sampled it.
    def end_turn
      @turn_active = false
      sample = @stall_sample
      return unless sample && sample[0] == @turn_seq && @stall_threshold

      @stall_sample = nil
      @stalls += 1
      @stall_reporter&.__send__(:__report_stall, sample[1], monotonic - @turn_started, sample[2])
    end
  end
end
