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
        *HTTP_EVERYONE.flat_map { |c| http_rows(c) },
        *HTTP_EVERYONE.flat_map { |c| http_thread_rows(c) },
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
                }),
        # the other connection counts, in the scaling table (bench/runner/scaling.rb)
        *(HTTP_CONNECTIONS - HTTP_EVERYONE).flat_map { |c| http_rows(c) + http_thread_rows(c) }
          .each { |row| row.section = :scaling }
      ]
    end

    # The rows of the HTTP case with c connections (ids http<c>..., labels
    # "HTTP, 1,000 conns...": the ids and labels of the rows before the scaling
    # counts, so that old READMEs compare).
    def http_rows(c)
      id = "http#{c}"
      name = "HTTP, #{count_text(c)} conns"
      at = ->(key) { ->(r) { r.dig(id, key) } }
      [Row.new(id: id, label: name, unit: "req/s", better: :higher, plot: HTTP_EVERYONE.include?(c),
               value: at.call("requests_per_second")),
       Row.new(id: "#{id}us", label: "#{name}: server's CPU per request", unit: "µs", better: :lower,
               value: at.call("cpu_us_per_request")),
       Row.new(id: "#{id}wrk", label: "#{name}: wrk's CPU (near 100: wrk set the rate)", unit: "% CPU",
               better: :lower, value: at.call("wrk_cpu_pct")),
       Row.new(id: "#{id}p50", label: "#{name}, p50", unit: "ms", better: :lower, value: at.call("latency_p50_ms")),
       Row.new(id: "#{id}p99", label: "#{name}, p99", unit: "ms", better: :lower, value: at.call("latency_p99_ms")),
       Row.new(id: "#{id}max", label: "#{name}, max", unit: "ms", better: :lower, value: at.call("latency_max_ms")),
       Row.new(id: "#{id}open", label: "#{name}: connections open at the server (fewest counted)", unit: "conns",
               better: :higher, value: at.call("connections_open")),
       Row.new(id: "#{id}err", label: "#{name}: wrk's errors (socket errors and non-2xx answers)", unit: "errors",
               better: :lower, value: at.call("errors")),
       Row.new(id: "#{id}gc", label: "#{name}: Ruby's collections per 1,000 requests", unit: "ratio",
               better: :lower, value: at.call("gc_per_1k_requests")),
       Row.new(id: "#{id}gcms", label: "#{name}: ms in Ruby's collections per 1,000 requests", unit: "ms",
               better: :lower, value: at.call("gc_ms_per_1k_requests")),
       # how long the steady part was (bench/lib/steady_window.rb); none: the CPU rows are over the whole run
       Row.new(id: "#{id}steady", label: "#{name}: steady part the CPU rows are over (— : the whole run)", unit: "s",
               better: :higher, value: at.call("window_s"))]
    end

    # Where the server's CPU went by thread (bench/runner/running.rb, cpu_split).
    def http_thread_rows(c)
      id = "http#{c}"
      name = "HTTP, #{count_text(c)} conns"
      at = ->(key) { ->(r) { r.dig(id, key) } }
      [Row.new(id: "#{id}cpu", label: "#{name}: main Ruby thread's CPU", unit: "% CPU", better: :lower,
               value: at.call("cpu_main_pct")),
       Row.new(id: "#{id}go", label: "#{name}: Go threads' CPU", unit: "% CPU", better: :lower,
               value: at.call("cpu_go_pct")),
       Row.new(id: "#{id}gous", label: "#{name}: Go threads' CPU per request", unit: "µs", better: :lower,
               value: at.call("go_us_per_request"))]
    end
  end
end
