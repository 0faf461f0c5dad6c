# Child script of test/test_ractors.rb: RACTORS Ractors, each running a
# farce scheduler with socket ping-pong, timers and bursts of accepts at
# once for SECONDS, while the main Ractor forces GC.start and GC.compact
# over and over. Each Ractor counts what it sent and what arrived; the
# script prints "RACTOR i counts.inspect" for each, "GCS n", the descriptors
# and threads of the process before and after ("FDS before after",
# "TASKS before after"), then "DONE". BACKEND, RACTORS, SECONDS and
# SCRIPTS_DIR are set before this code.
require File.join(SCRIPTS_DIR, "ractor_support")
require "socket"

def descriptors = Dir.children("/proc/self/fd").size
def tasks = Dir.children("/proc/self/task").size

# In a module: the lambda's self is then shareable (Ractor.new needs it so).
module Stress
  WORK = Ractor.make_shareable(lambda do |backend, seconds|
    counts = Hash.new(0)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    over = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline }
    server = TCPServer.new("127.0.0.1", 0)
    port = server.addr[1]
    Farce.run(backend: backend) do
      # ping-pong: each round trip must bring back what was sent
      a, b = UNIXSocket.pair
      Fiber.schedule do
        while (message = b.gets)
          b.write(message)
        end
        b.close
      end
      Fiber.schedule do
        until over.call
          counts[:pings] += 1
          a.write("#{counts[:pings]}\n")
          counts[:pongs] += 1 if a.gets.to_i == counts[:pings]
        end
        a.close
      end
      # timers: 10 fibers sleeping 1 ms at a time
      10.times do
        Fiber.schedule do
          until over.call
            sleep 0.001
            counts[:sleeps] += 1
          end
        end
      end
      # accept bursts: 10 clients at a time connect and send one byte each
      Fiber.schedule do
        loop do
          client = server.accept
          Fiber.schedule do
            counts[:accepted] += 1 if client.read(1) == "x"
            client.close
          end
        end
      rescue IOError
        nil # the server was closed: the bursts are over
      end
      Fiber.schedule do
        until over.call
          burst = Array.new(10) do
            Fiber.schedule do
              s = TCPSocket.new("127.0.0.1", port)
              counts[:connected] += 1
              s.write("x")
              s.close
            end
          end
          sleep 0.001 while burst.any?(&:alive?)
        end
        # the last burst's reads (bounded: a lost one fails the count, not the run)
        give_up = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
        sleep 0.01 until counts[:accepted] == counts[:connected] || Process.clock_gettime(Process::CLOCK_MONOTONIC) > give_up
        server.close
      end
    end
    counts[:threads_left] = Thread.list.count { |t| t != Thread.current && t.name != "farce-timeouts" && t.alive? }
    counts
  end)
end

# Runs the Ractors once, forcing the GC meanwhile; prints each one's counts.
def round
  ractors = Array.new(RACTORS) { Ractor.new(BACKEND, SECONDS) { |backend, seconds| Stress::WORK.call(backend, seconds) } }
  gcs = 0
  compact = GC.respond_to?(:compact)
  waiter = Thread.new { ractors.each_with_index.map { |r, i| [i, (value_of(r) rescue $!)] } }
  until waiter.join(0.02)
    GC.start
    gcs += 1
    next unless compact && gcs % 5 == 0

    begin
      GC.compact
    rescue NotImplementedError
      compact = false
    end
  end
  waiter.value.each do |i, counts|
    if counts.is_a?(Exception)
      cause = counts.cause || counts
      puts "FAILED #{i} #{cause.class}: #{cause.message} #{cause.backtrace&.first(4)&.join(' < ')}"
    else
      puts "RACTOR #{i} #{counts.to_h.inspect}"
    end
  end
  puts "GCS #{gcs} #{compact ? 'with' : 'without'} compaction"
end

def settle
  GC.start
  sleep 0.2 # a Ractor's native thread ends a moment after its value is taken
end

# warm: the Go core loaded (its threads started) before the first count
Farce.run(backend: BACKEND) { sleep 0.001 }
settle
fds_before = descriptors
round
settle
puts "FDS #{fds_before} #{descriptors}"
# The Go runtime and Ruby keep a pool of native threads that grows with the
# Ractors calling at once; a second round must not grow it again.
tasks_before = tasks
puts "ROUND 2"
round
settle
puts "TASKS #{tasks_before} #{tasks}"
puts "DONE"
