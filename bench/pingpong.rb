# frozen_string_literal: true

# Pipe ping-pong: PAIRS pairs of fibers (or threads) bounce one byte over two
# pipes for SECONDS; prints round trips per second as JSON. The same workload
# code runs under every contender:
#   ruby bench/pingpong.rb farce|farce-poll|threads|async [pairs] [seconds]
require "json"

contender = ARGV[0] || "farce"
pairs = Integer(ARGV[1] || 1)
seconds = Float(ARGV[2] || 2)

def pair_workload(deadline, counter, index)
  r1, w1 = IO.pipe
  r2, w2 = IO.pipe
  echo = proc do
    while (b = r1.read(1))
      w2.write(b)
    end
  end
  ping = proc do
    n = 0
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      w1.write("x")
      r2.read(1)
      n += 1
    end
    w1.close
    counter[index] = n
  end
  [echo, ping]
end

def run_fibers(pairs, seconds)
  counter = Array.new(pairs, 0)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  pairs.times do |i|
    echo, ping = pair_workload(deadline, counter, i)
    Fiber.schedule(&echo)
    Fiber.schedule(&ping)
  end
  counter
end

start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
counter =
  case contender
  when "farce", "farce-poll", "farce-epoll"
    $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
    require "farce"
    backend = contender == "farce" ? :auto : contender.delete_prefix("farce-").to_sym
    Farce.run(backend: backend) { run_fibers(pairs, seconds) }
  when "async"
    require "async"
    Sync { run_fibers(pairs, seconds) }
  when "threads"
    counter = Array.new(pairs, 0)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    pairs.times.flat_map { |i| pair_workload(deadline, counter, i).map { |l| Thread.new(&l) } }.each(&:join)
    counter
  else
    abort "unknown contender #{contender}"
  end
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
puts JSON.generate(contender: contender, ruby: RUBY_VERSION, pairs: pairs,
                   round_trips_per_second: (counter.sum / elapsed).round)
