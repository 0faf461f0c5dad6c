# frozen_string_literal: true

# The one thing that differs between contenders: how a unit of concurrency is
# started and how the program waits for all of them. Every workload in
# bench/workloads.rb and bench/http_hello.rb is written against this API, so
# the workload code is byte-for-byte the same for farce, Async and threads.
#
#   harness = Bench::Harness.new("farce-epoll")   # or farce-poll, farce, async, threads; +stall: FARCE_STALL_MS=100
#   harness.run do                                 # returns when every task finished
#     harness.spawn { ... }                        # a fiber (Fiber.schedule) or a Thread
#   end
module Bench
  MONO = Process::CLOCK_MONOTONIC

  def self.now
    Process.clock_gettime(MONO)
  end

  # Resident set size of this process in bytes (Linux).
  def self.rss
    File.read("/proc/self/status")[/^VmRSS:\s+(\d+)/, 1].to_i * 1024
  end

  # Raises the soft descriptor limit to the hard limit; returns the new soft limit.
  def self.raise_nofile
    _soft, hard = Process.getrlimit(:NOFILE)
    Process.setrlimit(:NOFILE, hard, hard)
    Process.getrlimit(:NOFILE)[0]
  end

  def self.percentile(sorted, q)
    return nil if sorted.empty?

    sorted[[(q * sorted.size).ceil - 1, 0].max]
  end

  class Harness
    attr_reader :contender, :kind, :backend

    def initialize(contender)
      @contender = contender.sub(/@.*\z/, "") # "farce-epoll@3.3" runs under sid's Ruby; same code
      # "farce-epoll+stall": the same with stall detection on (100 ms), to show what it costs
      ENV["FARCE_STALL_MS"] = "100" if @contender.end_with?("+stall")
      @contender = @contender.delete_suffix("+stall")
      case @contender
      when "farce", /\Afarce-/
        @kind = :farce
        @backend = @contender == "farce" ? :auto : @contender.delete_prefix("farce-").to_sym
        $LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
        require "farce"
      when "async"
        @kind = :async
        require "async"
      when "threads"
        @kind = :threads
        @threads = []
        @lock = Mutex.new
      else
        raise ArgumentError, "unknown contender #{contender.inspect} (farce[-BACKEND], async, threads)"
      end
    end

    def fibers?
      @kind != :threads
    end

    # Runs the block as the first task and returns its value once every task
    # spawned (directly or not) has finished.
    def run(&block)
      case @kind
      when :farce then Farce.run(backend: @backend, &block)
      when :async then Sync { block.call }
      else
        value = block.call
        loop do
          thread = @lock.synchronize { @threads.shift }
          break unless thread

          thread.join
        end
        value
      end
    end

    def spawn(&block)
      if @kind == :threads
        thread = Thread.new(&block)
        @lock.synchronize { @threads << thread }
        thread
      else
        Fiber.schedule(&block)
      end
    end

    def versions
      v = { ruby: RUBY_VERSION }
      case @kind
      when :farce
        v[:farce] = Farce::VERSION
        v[:backend] = @backend
      when :async
        v[:async] = Async::VERSION
        v[:io_event] = IO::Event::VERSION if defined?(IO::Event::VERSION)
        v[:selector] = IO::Event::Selector.default.name if defined?(IO::Event::Selector)
      end
      v
    end
  end
end
