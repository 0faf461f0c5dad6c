# frozen_string_literal: true

# The ping-pong of bench/workloads.rb for a fixed number of round trips
# instead of a fixed time, so that two runs differ only in how many round
# trips they made (bench/instructions.rb subtracts one count from the other).
#
#   ruby bench/lib/counted_pingpong.rb CONTENDER ROUND_TRIPS pipe|socket
#
# Prints one JSON line: round trips, objects allocated per round trip.
require "json"
require "socket"
require_relative "harness"

module Bench
  module CountedPingpong
    module_function

    def main(contender, trips, over)
      raise ArgumentError, "over must be pipe or socket, not #{over.inspect}" unless %w[pipe socket].include?(over)

      harness = Harness.new(contender)
      pair = -> { over == "socket" ? UNIXSocket.pair : IO.pipe }
      allocated = nil
      harness.run do
        r1, w1 = pair.call
        r2, w2 = pair.call
        harness.spawn do
          while (byte = r1.read(1))
            w2.write(byte)
          end
          r1.close
          w2.close
        end
        harness.spawn do
          before = GC.stat(:total_allocated_objects)
          trips.times do
            w1.write("x")
            r2.read(1)
          end
          allocated = GC.stat(:total_allocated_objects) - before
          w1.close
          r2.close
        end
      end
      puts JSON.generate(round_trips: trips, over: over, objects_per_round_trip: (allocated.to_f / trips).round(2),
                         versions: harness.versions)
    end
  end
end

Bench::CountedPingpong.main(ARGV[0], Integer(ARGV[1]), ARGV[2] || "socket") if $PROGRAM_NAME == __FILE__
