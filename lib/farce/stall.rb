# frozen_string_literal: true

module Farce
  # What on_stall gets when one fiber held the loop longer than the stall
  # threshold (Scheduler.new(stall_threshold:, on_stall:), FARCE_STALL_MS):
  # the fiber (nil when the native loop could not sample it; the Ruby loop
  # knows it without a sample), how long it held the loop in seconds (final:
  # the report comes when it gave the loop back), and its backtrace where it
  # was when the threshold passed ("file:line:in ..." strings, innermost
  # first; empty when it could not be sampled).
  StallReport = Struct.new(:fiber, :duration, :backtrace) do
    # The innermost frame outside farce itself (where the application was).
    def location
      backtrace.find { |frame| !frame.start_with?(LIB_DIR) } || backtrace.first
    end

    def to_s
      "farce: a fiber held the event loop for #{(duration * 1000).round(1)} ms" \
        "#{location ? " at #{location}" : ''} (stall threshold exceeded)"
    end
  end
  LIB_DIR = File.expand_path("..", __dir__).freeze
  private_constant :LIB_DIR

  # The default on_stall: one line on $stderr through Kernel#warn. Shareable
  # (every Ractor's schedulers report through it).
  DEFAULT_ON_STALL = Ractor.make_shareable(->(report) { warn(report.to_s) })

  # FARCE_STALL_MS as a threshold in seconds, or nil (unset or empty: off).
  def self.stall_threshold_from_environment
    value = ENV["FARCE_STALL_MS"]
    return nil if value.nil? || value.strip.empty?

    ms = Float(value, exception: false)
    raise ArgumentError, "FARCE_STALL_MS must be a number of milliseconds > 0, not #{value.inspect}" unless ms&.positive?

    ms / 1000.0
  end

  # Stall detection for both front ends (Farce::Scheduler and the io-event
  # selector): the C loop calls __report_stall when a turn that the
  # core's watchdog saw stall ends (ext/farce/loop/stall.c).
  module StallReporting
    # The callable that gets each StallReport (default: DEFAULT_ON_STALL).
    def on_stall
      @on_stall || DEFAULT_ON_STALL
    end

    def on_stall=(callable)
      raise ArgumentError, "on_stall must respond to call, not #{callable.inspect}" unless callable.nil? || callable.respond_to?(:call)

      @on_stall = callable
    end

    # Seconds one fiber may run without giving the loop back before it is
    # reported; nil turns detection off.
    def stall_threshold=(seconds)
      self.__stall_threshold = Scheduler.duration_option(:stall_threshold, seconds)
    end

    private

    # An exception from on_stall must not end the loop: it is reported instead.
    def __report_stall(fiber, duration, backtrace)
      on_stall.call(StallReport.new(fiber, duration, backtrace.freeze))
      nil
    rescue StandardError => e
      warn "farce: on_stall raised #{e.class}: #{e.message}"
      nil
    end
  end

  IOEventSelector.include(StallReporting) if defined?(IOEventSelector)
end
