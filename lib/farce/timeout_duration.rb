# frozen_string_literal: true

module Farce
  # How long Scheduler#timeout_after lets its block run: what
  # Timeout.timeout makes of the same duration without a scheduler, so
  # that a negative, NaN or enormous one gets the same answer under farce
  # (docs/behaviour.md, "Timeout"). That depends on the Timeout in use,
  # not on farce:
  #
  # - Timeout before 0.3 (Ruby 3.1's 0.2.0) waits in a thread of its own
  #   with Kernel#sleep, and a duration sleep refuses becomes that error,
  #   raised into the block: ArgumentError for a negative one, RangeError
  #   for NaN, an infinite one, or one past time_t.
  # - Timeout 0.3 and later (Ruby 3.2 on) compare deadlines: a negative
  #   duration is due at once (0.4.2 and later refuse it with ArgumentError
  #   before the scheduler is asked), NaN is never due, and one too large to
  #   wait for is never due either (its thread dies in the wait, leaving the
  #   block alone). Ruby's reference scheduler (test/fiber/scheduler.rb)
  #   answers the same.
  module TimeoutDuration
    # As the loops read timeouts: centuries are as good as never.
    FOREVER = 9.0e9
    # Past this many seconds Kernel#sleep refuses a duration (time_t).
    SLEEP_LIMIT = 2.0**63

    class << self
      # The seconds to wait (a Float >= 0), or nil when the block must run
      # without a timeout; raises what Timeout raises for the duration.
      def seconds(duration)
        raise TypeError, "can't convert #{duration.class} into time interval" unless duration.is_a?(Numeric)

        seconds = duration.to_f
        return seconds if seconds >= 0 && seconds <= FOREVER # every Timeout's answer (NaN is neither)

        sleep_error(duration, seconds) if sleeping_timeout?
        return nil if seconds.nan? || seconds > FOREVER

        seconds.negative? ? 0.0 : seconds
      end

      private

      # Whether the Timeout loaded waits with Kernel#sleep (before 0.3).
      def sleeping_timeout?
        return false unless defined?(::Timeout::VERSION)

        major, minor = ::Timeout::VERSION.split(".").map(&:to_i)
        major.zero? && minor < 3
      end

      # Raises what Kernel#sleep(duration) raises (rb_time_interval), if it
      # refuses the duration.
      def sleep_error(duration, seconds)
        raise ArgumentError, "time interval must not be negative" if duration.negative?
        return if seconds.finite? && seconds < SLEEP_LIMIT

        shown = if seconds.nan? then "NaN"
                elsif seconds.infinite? then "Inf"
                else format("%f", seconds)
                end
        raise RangeError, "#{shown} out of Time range"
      end
    end
  end
end
