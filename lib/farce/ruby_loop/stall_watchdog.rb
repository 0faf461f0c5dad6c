# frozen_string_literal: true

module Farce
  class RubyLoop
    # Stall detection (the native loop's is ext/farce/loop/stall.c): a watchdog thread that samples the
    # loop thread's backtrace when a turn passes the threshold, and the loop's own look at each turn
    # that ended past it without a sample.

    # Stall detection on (seconds) or off (nil); reporter gets
    # __report_stall(fiber, seconds, backtrace) when a stalled turn ends.
    # A watchdog thread samples the loop thread's backtrace (the running
    # fiber's) once a turn passes the threshold: it gets the GVL at Ruby's
    # next thread switch (a time slice, 100 ms), or when a C call holding
    # the GVL returns, so short thresholds are seen late, never lost.
    def watch_stalls(seconds, reporter)
      @stall_threshold = seconds
      @stall_reporter = reporter
      return nil if !seconds || @stall_watchdog&.alive?

      @stall_watchdog = Thread.new { stall_watchdog }
      @stall_watchdog.report_on_exception = false
      nil
    end

    private

    # It looks before it sleeps: a watchdog that gets the GVL only as a long
    # C call returns (its first run included) samples the fiber there, if
    # that fiber has not given the loop back yet. The fiber named is the one
    # in_turn resumed last (the thread's own fiber outside the loop's turns).
    def stall_watchdog
      seen = nil
      while (threshold = @stall_threshold) && @open && !inert?
        seq = @turn_seq
        if @turn_active && seq != seen && monotonic - @turn_started >= threshold
          seen = seq
          backtrace = @thread.backtrace || []
          @stall_sample = [seq, @turn_owner || @turn_fiber, backtrace] if @turn_active && @turn_seq == seq
        end
        sleep((threshold / 4).clamp(0.001, 0.05))
      end
    end

    # fiber, resumed by in_turn at `entered`, gave the loop back (or the
    # fiber that resumed it). When the turn passed the threshold meanwhile,
    # fiber was running then, unless a fiber it resumed was (whose in_turn
    # ended first and said so). end_turn names it when the watchdog could
    # not sample the stall: a thread needs the GVL, and one C call that
    # keeps it (a sort, a compression, sqlite3's busy wait) can hold it
    # until the fiber ends or parks.
    def stall_crossed(fiber, entered)
      threshold = @stall_threshold
      return unless threshold && @turn_active && @stall_fiber_seq != @turn_seq
      return unless entered - @turn_started < threshold && monotonic - @turn_started >= threshold

      @stall_fiber = fiber
      @stall_fiber_seq = @turn_seq
    end
  end
end
