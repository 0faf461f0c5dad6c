# frozen_string_literal: true

# The Ruby floor for bench's ping-pong: the least any Ruby fiber scheduler can
# cost. The same ping-pong as the `pingpong` workload (over pipes, or
# socketpairs), with no scheduler:
# plain fibers bounce one byte with read_nonblock/write_nonblock and switch
# with Fiber#transfer straight to the fiber a write made runnable. IO.select
# runs only when every fiber would block (never, in steady state).
#
#   ruby bench/ruby_floor.rb PAIRS SECONDS [pipe|socket]   prints one JSON line like workloads.rb
require "json"
require "socket"

module Bench
  # A run queue and a table of fibers waiting to read; nothing else.
  class RubyFloor
    def initialize
      @runnable = []
      @readers = {} # IO => the fiber waiting to read it
      @main = Fiber.current
    end

    # Switches to the next runnable fiber, or to the polling main fiber.
    def switch
      (@runnable.shift || @main).transfer
    end

    def read1(io)
      loop do
        byte = io.read_nonblock(1, exception: false)
        return byte unless byte == :wait_readable

        @readers[io] = Fiber.current
        switch
      end
    end

    # A one-byte write to a pipe never blocks; it wakes the reader directly.
    def write1(writer, reader, byte)
      writer.write_nonblock(byte)
      wake(reader)
    end

    def wake(reader)
      fiber = @readers.delete(reader)
      @runnable << fiber if fiber
    end

    def spawn(&block)
      @runnable << Fiber.new(blocking: false) do
        block.call
        @finished += 1
        switch # a finished fiber never runs again
      end
    end

    def run(pairs, seconds, over = "pipe")
      @finished = 0
      counts = Array.new(pairs, 0)
      deadline = now + seconds
      pairs.times do |i|
        r1, w1 = over == "socket" ? UNIXSocket.pair : IO.pipe
        r2, w2 = over == "socket" ? UNIXSocket.pair : IO.pipe
        spawn do
          while (byte = read1(r1))
            write1(w2, r2, byte)
          end
        end
        spawn do
          n = 0
          while now < deadline
            write1(w1, r1, "x")
            read1(r2)
            n += 1
          end
          counts[i] = n
          w1.close
          wake(r1)
        end
      end
      started = now
      until @finished == 2 * pairs
        if (fiber = @runnable.shift)
          fiber.transfer
        else
          IO.select(@readers.keys)[0].each { |io| wake(io) }
        end
      end
      counts.sum / (now - started)
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  pairs = Integer(ARGV[0] || 1)
  seconds = Float(ARGV[1] || 2)
  over = ARGV[2] || "pipe"
  rate = Bench::RubyFloor.new.run(pairs, seconds, over)
  versions = { ruby: RUBY_VERSION, yjit: defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? true : nil }.compact
  puts JSON.generate(contender: "ruby-floor", workload: "pingpong", versions: versions,
                     result: { round_trips_per_second: rate.round, pairs: pairs, over: over })
end
