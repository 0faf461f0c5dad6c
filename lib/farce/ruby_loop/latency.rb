# frozen_string_literal: true

module Farce
  class RubyLoop
    # The wake-up latency histogram of the Ruby loop (the native loop's is
    # internal/sched/latency.go): eight buckets per power of two of
    # nanoseconds, so a percentile is at most 12.5% high.
    class LatencyHistogram
      attr_reader :count

      def initialize
        @counts = Hash.new(0)
        @count = 0
        @max = 0
      end

      # seconds: one wake-up's latency
      def record(seconds)
        ns = [(seconds * 1e9).to_i, 0].max
        @counts[bucket(ns)] += 1
        @count += 1
        @max = ns if ns > @max
      end

      def max = @max / 1e9

      # Seconds that q (0..1) of the records do not exceed; 0.0 when empty.
      def percentile(q)
        return 0.0 if @count.zero?

        want = (q * @count + 0.5).to_i.clamp(1, @count)
        seen = 0
        @counts.keys.sort.each do |b|
          seen += @counts[b]
          return [upper(b), @max].min / 1e9 if seen >= want
        end
        max
      end

      private

      def bucket(ns)
        return ns if ns < 8

        e = ns.bit_length
        ((e - 3) << 3) + ((ns >> (e - 4)) & 7)
      end

      def upper(b)
        return b if b < 8

        e = (b >> 3) + 3
        low = (8 | (b & 7)) << (e - 4)
        low + (1 << (e - 4)) - 1
      end
    end
  end
end
