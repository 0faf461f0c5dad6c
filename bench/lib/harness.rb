# frozen_string_literal: true

# The one thing that differs between contenders: how a unit of concurrency is
# started and how the program waits for all of them. Every workload in
# bench/workloads.rb and bench/http_hello.rb is written against this API, so
# the workload code is byte-for-byte the same for farce, Async and threads.
#
#   harness = Bench::Harness.new("farce-epoll")   # or farce-poll, farce, async, async-epoll, async-farce, threads
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

  # What the garbage collector did: counts, and its time in ms (GC.stat[:time]: every Ruby farce
  # supports has it).
  def self.gc_snapshot
    stat = GC.stat
    { minor: stat[:minor_gc_count], major: stat[:major_gc_count], objects: stat[:total_allocated_objects],
      ms: stat[:time] }
  end

  # GC per round trip between two snapshots: minor GCs per 1,000, objects
  # allocated, GC milliseconds per 1,000, and the mean minor GC's length.
  def self.gc_per(before, after, trips)
    return {} unless before && after && trips.positive?

    per = ->(key, scale) { ((after[key] - before[key]).to_f * scale / trips).round(3) }
    out = { gc_minor_per_1k_trips: per.call(:minor, 1000), gc_major_per_1k_trips: per.call(:major, 1000),
            objects_per_trip: per.call(:objects, 1) }
    if before[:ms] && after[:ms]
      out[:gc_ms_per_1k_trips] = per.call(:ms, 1000)
      gcs = after[:minor] + after[:major] - before[:minor] - before[:major]
      out[:gc_ms_per_gc] = ((after[:ms] - before[:ms]).to_f / gcs).round(3) if gcs.positive?
    end
    out
  end

  def self.percentile(sorted, q)
    return nil if sorted.empty?

    sorted[[(q * sorted.size).ceil - 1, 0].max]
  end

  # farce's lib folder: this tree's, or another checkout's (BENCH_FARCE_LIB, a contender
  # setting such as farce-epoll+BENCH_FARCE_LIB=/repo/tmp/base/lib@3.3), so that two trees of
  # farce are measured in one run, alternating, against the same workload code. The folder
  # must be under the repository to be seen in the sid chroot, and built for that Ruby.
  def self.farce_lib
    ENV.fetch("BENCH_FARCE_LIB") { File.expand_path("../../lib", __dir__) }
  end

  class Harness
    attr_reader :contender, :kind, :backend

    def initialize(contender)
      @contender = contender.sub(/[@+].*\z/, "") # "farce-epoll@3.3" runs under sid's Ruby; same code
      case @contender
      when "farce", /\Afarce-/
        @kind = :farce
        @backend = @contender == "farce" ? :auto : @contender.delete_prefix("farce-").to_sym
        $LOAD_PATH.unshift(Bench.farce_lib)
        require "farce"
      when "async"
        @kind = :async
        require "async"
      when "async-epoll" # Async on io-event's native EPoll built for this Ruby (the runner puts it on the load path)
        @kind = :async
        require "async"
        unless IO::Event::Selector.const_defined?(:EPoll)
          raise LoadError, "async-epoll: io-event's native EPoll selector did not load on Ruby #{RUBY_VERSION} " \
                           "(build it with FARCE_PEER_SUITES=DIR .ci/io-event-build #{RUBY_VERSION[/\A\d+\.\d+/]})"
        end
      when "async-farce" # Async on farce's io-event selector (IO_EVENT_SELECTOR=Farce)
        @kind = :async
        $LOAD_PATH.unshift(Bench.farce_lib)
        require "farce/io_event"
        ENV["IO_EVENT_SELECTOR"] = "Farce"
        require "async"
      when "threads"
        @kind = :threads
        @threads = []
        @lock = Mutex.new
      else
        raise ArgumentError, "unknown contender #{contender.inspect} (farce[-BACKEND], async, async-epoll, async-farce, threads)"
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
      v[:yjit] = true if defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?
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
