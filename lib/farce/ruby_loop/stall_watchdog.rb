# frozen_string_literal: true

module Farce
  class RubyLoop
    # Stall detection (the native loop's is ext/farce/loop/stall.c): a watchdog thread that samples the
    # loop thread's backtrace when a turn passes the threshold.

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

    def stall_watchdog
      seen = nil
      while (threshold = @stall_threshold) && @open && !inert?
        sleep((threshold / 4).clamp(0.001, 0.05))
        seq = @turn_seq
        threshold = @stall_threshold or break # turned off meanwhile
        next unless @turn_active && seq != seen && monotonic - @turn_started >= threshold

        seen = seq
        backtrace = @thread.backtrace || []
        @stall_sample = [seq, @turn_fiber, backtrace] if @turn_active && @turn_seq == seq
      end
    end
  end
end
