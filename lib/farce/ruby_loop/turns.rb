# frozen_string_literal: true

module Farce
  class RubyLoop
    # Turns (the native loop's are in ext/farce/loop/event_loop.c, the same rule): a fiber that holds the
    # loop past its budget gives it a turn; begin_turn/end_turn stamp each turn for stall detection.

    # Seconds a fiber may hold the loop before a hook that would not block
    # gives the loop a turn (nil: never); Scheduler.new(turn_budget:) sets it.
    attr_accessor :turn_budget

    # Called where a hook would go on without blocking (Fiber.schedule, a
    # read or write that moved data): past the budget, a fiber of ours
    # yields (the loop resumes it after one iteration); any other goes on.
    # A hook on an IO passes it (io, before the hook reads its descriptor):
    # the hook was asked about the open file the number named then, and C
    # code may close the number behind the IO's back within the turn and get
    # it again for another file, which must not take these bytes. When the
    # number names another file after the turn than before, the hook raises
    # the IOError a wait parked on the old file gets (the native loop's
    # farce_loop_give_turn_on). Asked only when a turn is given.
    def turn_check(io = nil)
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
        fd = io && descriptor_of(io)
        file = fd && file_identity(io)
        @turns_given += 1
        park(Wait.new(Fiber.current), :after_poll)
      end
      @turn_started = monotonic
      # io itself closed meanwhile: the hook's own check raises
      if file && descriptor_of(io) == fd && file_identity(io) != file
        raise IOError, "closed stream (descriptor #{fd} was closed, or now names another open file)"
      end

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

    # The turn that just ended: reported, once, if it lasted the stall
    # threshold: with the watchdog's sample, or, when it could take none
    # (stall_crossed), naming the fiber that ran when the turn passed the
    # threshold, with an empty backtrace, as the native loop reports a stall
    # it could not sample.
    def end_turn
      @turn_active = false
      threshold = @stall_threshold or return
      duration = monotonic - @turn_started
      sample = @stall_sample
      if sample && sample[0] == @turn_seq
        fiber, backtrace = sample[1], sample[2]
      elsif duration >= threshold
        fiber = @stall_fiber_seq == @turn_seq ? @stall_fiber : @turn_fiber
        backtrace = []
      else
        return
      end
      @stall_sample = @stall_fiber = nil
      @stalls += 1
      @stall_reporter&.__send__(:__report_stall, fiber, duration, backtrace)
    end
  end
end
