# frozen_string_literal: true

module Farce
  class RubyLoop
    # The loop's half of a raise Farce::HeldAlarms' watcher makes into a
    # fiber that holds the thread (raise_held in ruby_loop.rb, the watcher's
    # half; the native loop's take_held_raise in fiber_scheduler.c is the
    # same): the exception is taken in the fiber it is for, before that
    # fiber's turn ends, never in the loop or in the next fiber.

    private

    # Before a fiber parks (ending_turn: its turn ends here) or cancels its
    # alarm: when the watcher has started a raise into it, waits until
    # Thread#raise has queued the exception, then lets Ruby raise it here.
    def take_held_raise(ending_turn:)
      fiber = Fiber.current
      @turn_owner = nil if ending_turn && @turn_owner.equal?(fiber)
      return unless @held_fiber.equal?(fiber)

      @held_fiber = @held_error = nil
      wait_for_the_watcher
    end

    # In the loop (or a spawner), once the turn of a fiber the watcher
    # raised into ended without a park or its alarm's cancel (switched away
    # from by hand, or ended by an exception of its own past its Timeout's
    # ensure): the exception, meant for a turn that is over, is taken here
    # and dropped; anything else raised meanwhile goes on.
    def drop_held_raise
      error = @held_error
      @held_fiber = @held_error = nil
      wait_for_the_watcher
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise unless e.equal?(error)
    end

    # Until Thread#raise has queued the exception, then an interrupt check
    # that raises it here (handle_interrupt's block looks at the thread's
    # queue itself, whichever fiber the raise flagged).
    def wait_for_the_watcher
      Thread.pass while @held_raising
      Thread.handle_interrupt(Object => :immediate) { nil }
    end
  end
end
