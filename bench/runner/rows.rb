# frozen_string_literal: true

# The rows of the results table: each Row names a figure and how to read it from one run's
# results. Add a row here to report a new figure.
module Bench
  class Runner
    def rows
      [
        Row.new(id: "pp1", label: "ping-pong, 1 pair", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("pp1", "round_trips_per_second") }),
        Row.new(id: "ppsock1", label: "ping-pong over a socketpair, 1 pair", unit: "round trips/s", better: :higher,
                plot: true, value: ->(r) { r.dig("ppsock1", "round_trips_per_second") }),
        Row.new(id: "pp100", label: "ping-pong, 100 pairs", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("pp100", "round_trips_per_second") }),
        Row.new(id: "http64", label: "HTTP, 64 conns", unit: "req/s", better: :higher, plot: true,
                value: ->(r) { r.dig("http64", "requests_per_second") }),
        Row.new(id: "http64us", label: "HTTP, 64 conns: server's CPU per request", unit: "µs", better: :lower,
                value: ->(r) { r.dig("http64", "cpu_us_per_request") }),
        Row.new(id: "http64wrk", label: "HTTP, 64 conns: wrk's CPU (near 100: wrk set the rate)", unit: "% CPU",
                better: :lower, value: ->(r) { r.dig("http64", "wrk_cpu_pct") }),
        Row.new(id: "http64p50", label: "HTTP, 64 conns, p50", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http64", "latency_p50_ms") }),
        Row.new(id: "http64p99", label: "HTTP, 64 conns, p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http64", "latency_p99_ms") }),
        Row.new(id: "http64max", label: "HTTP, 64 conns, max", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http64", "latency_max_ms") }),
        Row.new(id: "http1000", label: "HTTP, 1,000 conns", unit: "req/s", better: :higher, plot: true,
                value: ->(r) { r.dig("http1000", "requests_per_second") }),
        Row.new(id: "http1000us", label: "HTTP, 1,000 conns: server's CPU per request", unit: "µs", better: :lower,
                value: ->(r) { r.dig("http1000", "cpu_us_per_request") }),
        Row.new(id: "http1000wrk", label: "HTTP, 1,000 conns: wrk's CPU (near 100: wrk set the rate)", unit: "% CPU",
                better: :lower, value: ->(r) { r.dig("http1000", "wrk_cpu_pct") }),
        Row.new(id: "http1000p50", label: "HTTP, 1,000 conns, p50", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http1000", "latency_p50_ms") }),
        Row.new(id: "http1000p99", label: "HTTP, 1,000 conns, p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http1000", "latency_p99_ms") }),
        Row.new(id: "http1000max", label: "HTTP, 1,000 conns, max", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http1000", "latency_max_ms") }),
        Row.new(id: "http64cpu", label: "HTTP, 64 conns: main Ruby thread's CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http64", "cpu_main_pct") }),
        Row.new(id: "http64go", label: "HTTP, 64 conns: Go threads' CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http64", "cpu_go_pct") }),
        Row.new(id: "http64gous", label: "HTTP, 64 conns: Go threads' CPU per request", unit: "µs", better: :lower,
                value: ->(r) { r.dig("http64", "go_us_per_request") }),
        Row.new(id: "http1000cpu", label: "HTTP, 1,000 conns: main Ruby thread's CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http1000", "cpu_main_pct") }),
        Row.new(id: "http1000go", label: "HTTP, 1,000 conns: Go threads' CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http1000", "cpu_go_pct") }),
        Row.new(id: "http1000gous", label: "HTTP, 1,000 conns: Go threads' CPU per request", unit: "µs",
                better: :lower, value: ->(r) { r.dig("http1000", "go_us_per_request") }),
        Row.new(id: "scale0", label: "ping-pong, 0 idle conns", unit: "round trips/s", better: :higher,
                value: ->(r) { r.dig("scale0", "round_trips_per_second") }),
        Row.new(id: "scale10k", label: "ping-pong, 10,000 idle conns", unit: "round trips/s", better: :higher,
                plot: true, value: ->(r) { r.dig("scale10k", "round_trips_per_second") }),
        Row.new(id: "scaleratio", label: "10,000 idle / 0 idle", unit: "ratio", better: :higher,
                value: lambda { |r|
                  a = r.dig("scale10k", "round_trips_per_second")
                  b = r.dig("scale0", "round_trips_per_second")
                  a && b&.positive? ? (a.to_f / b).round(3) : nil
                }),
        Row.new(id: "scale10kgc", label: "10,000 idle: minor GCs per 1,000 round trips", unit: "ratio", better: :lower,
                value: ->(r) { r.dig("scale10k", "gc_minor_per_1k_trips") }),
        Row.new(id: "scale10kgcms", label: "10,000 idle: ms per GC (where the Ruby keeps GC time)", unit: "ms",
                better: :lower, value: ->(r) { r.dig("scale10k", "gc_ms_per_gc") }),
        Row.new(id: "timers", label: "timers, random 1–1000 ms sleeps", unit: "timers/CPU-s", better: :higher, plot: true,
                value: ->(r) { r.dig("timers", "timers_per_cpu_second") }),
        Row.new(id: "timersp99", label: "timer lateness p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("timers", "lateness_p99_ms") }),
        Row.new(id: "timersalive", label: "timers: most sleepers parked at once", unit: "fibers", better: :lower,
                value: ->(r) { r.dig("timers", "peak_alive") }),
        Row.new(id: "timersgc", label: "timers: mean GC pause (where the Ruby keeps GC time)", unit: "ms",
                better: :lower, value: ->(r) { r.dig("timers", "gc_ms_mean") }),
        Row.new(id: "spawnp50", label: "spawn burst: timer lateness p50", unit: "ms", better: :lower,
                value: ->(r) { r.dig("spawnburst", "lateness_p50_ms") }),
        Row.new(id: "spawnp99", label: "spawn burst: timer lateness p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("spawnburst", "lateness_p99_ms") }),
        Row.new(id: "acceptgap", label: "accept burst: ticker's worst gap", unit: "ms", better: :lower,
                value: ->(r) { r.dig("acceptburst", "worst_gap_ms") }),
        Row.new(id: "accepttotal", label: "accept burst: total time", unit: "ms", better: :lower,
                value: ->(r) { (v = r.dig("acceptburst", "burst_s")) && (v * 1000).round(1) }),
        Row.new(id: "filesgap", label: "file reads: ticker's worst gap", unit: "ms", better: :lower,
                value: ->(r) { r.dig("files", "worst_gap_ms") }),
        Row.new(id: "filesp99", label: "file reads: ticker's gap p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("files", "gap_p99_ms") }),
        Row.new(id: "filesrate", label: "file reads: all 64 together", unit: "MiB/s", better: :higher,
                value: ->(r) { r.dig("files", "mib_per_second") }),
        Row.new(id: "queue", label: "Queue hand-off", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("queue", "round_trips_per_second") }),
        Row.new(id: "xthread", label: "cross-thread wake-up", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("xthread", "round_trips_per_second") }),
        Row.new(id: "memfiber", label: "memory per parked task", unit: "KiB", better: :lower,
                value: ->(r) { (v = r.dig("memfiber", "bytes_per_task")) && (v / 1024.0).round(1) }),
        Row.new(id: "memfd", label: "memory per registered descriptor (noisy)", unit: "KiB", better: :lower,
                value: lambda { |r|
                  io = r.dig("memio", "bytes_per_task")
                  fb = r.dig("memfiber", "bytes_per_task")
                  io && fb ? ((io - fb) / 1024.0).round(2) : nil
                })
      ]
    end
  end
end
