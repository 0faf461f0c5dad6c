# frozen_string_literal: true

# Async on IO_EVENT_SELECTOR=Farce against Async on io-event's EPoll selector,
# in one run, alternating:
#
#   ruby bench/async_http.rb            # or: rake bench:async_http
#
# 1. examples/async_http_app.rb (a Rack-style app on Async::HTTP::Server)
#    under wrk at each connection count. Besides req/s and latency, every run
#    reports the server's CPU time and Ruby GC time per request (read from
#    the server before and after wrk), because at 1,000 connections Ruby's GC
#    decides the outcome: a run where major GCs start to chain (the heap has
#    no free slots, GC.latest_gc_info(:major_by) = :nofree) serves ~40% fewer
#    requests whichever selector it uses.
# 2. Workloads where the selector does most of the non-Ruby work
#    (bench/workloads.rb under Async): pipe ping-pong with 1 and 100 pairs, and
#    a Thread::Queue hand-off. They show what the selector itself is worth;
#    the HTTP app shows how much of that survives in a real server.
# 3. Where the server's CPU goes: in round 1, `perf record` samples the server
#    during wrk and the report gives each part's share (the selector's own
#    libraries, Ruby's VM, the kernel). That bounds any selector: the req/s a
#    selector can win is at most the share its own code has.
#
# Everything runs under Ruby 3.3 in the sid chroot (.ci/sid-run, made by .ci/sid-setup),
# which has Async and async-http; the host's wrk reaches the server on
# 127.0.0.1. Figures are medians over BENCH_ROUNDS rounds (default 3; the
# selectors alternate which goes first). Knobs: BENCH_DURATION (wrk seconds,
# default 10), BENCH_CONNECTIONS ("64 1000"), BENCH_ROUNDS, BENCH_SID_RUN,
# BENCH_SKIP_WORKLOADS=1, BENCH_PERF=0 (no profile; also skipped without perf).
require "socket"
require "timeout"
require "json"
require "fileutils"
require_relative "lib/wrk_time"
require_relative "lib/free_port"

ROOT = File.expand_path("..", __dir__)
SID_RUN = ENV["BENCH_SID_RUN"] || File.join(ROOT, ".ci", "sid-run")
DURATION = Integer(ENV.fetch("BENCH_DURATION", "10"))
CONNECTIONS = ENV.fetch("BENCH_CONNECTIONS", "64 1000").split.map { |c| Integer(c) }
ROUNDS = Integer(ENV.fetch("BENCH_ROUNDS", "3"))
SELECTORS = %w[Farce EPoll].freeze
SID_ROOT = ENV.fetch("SID_ROOT", "/opt/rubies/sid")
PERF = ENV["BENCH_PERF"] != "0" && system("perf --version", out: File::NULL, err: File::NULL)
# perf's shared-object names, grouped into the parts the report shows
PERF_PARTS = { "selector" => /\A(libfarce_core\.so|farce_ext\.so|IO_Event\.so)\z/, "Ruby VM" => /\Alibruby/,
               "kernel" => /\A\[kernel/, "libc" => /\Alibc\.so/ }.freeze
WORKLOADS = [["ping-pong, 1 pair", "pingpong", "pairs=1"], ["ping-pong, 100 pairs", "pingpong", "pairs=100"],
             ["Queue hand-off", "queue"]].freeze

# The server process: the example app, plus a thread that answers "STAT"
# lines on stdin with the process's CPU and GC counters (and its pid, which
# sid-run hides) and exits when stdin closes, so the driver can always stop
# it through sid-run.
SERVER = <<~RUBY
  Thread.new do
    while (line = $stdin.gets)
      next unless line.start_with?("STAT")
      gc = GC.stat
      $stdout.puts [Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID), gc[:time], gc[:major_gc_count],
                    gc[:minor_gc_count], Process.pid].join(" ")
      $stdout.flush
    end
    exit!(0)
  end
  _soft, hard = Process.getrlimit(:NOFILE); Process.setrlimit(:NOFILE, hard, hard)
  require_relative "examples/async_http_app"
  port = Integer(ARGV[0])
  Async do
    $stdout.puts "READY \#{port} \#{AsyncHttpApp.selector_name}"; $stdout.flush
    AsyncHttpApp.server("http://127.0.0.1:\#{port}").run
  end
RUBY

# Yields the port and a proc that returns the server's counters
# [cpu seconds, GC ms, major GCs, minor GCs, pid].
def with_server(selector)
  port = Bench.free_port
  stdin_r, stdin_w = IO.pipe
  out_r, out_w = IO.pipe
  pid = Process.spawn({ "IO_EVENT_SELECTOR" => selector }, SID_RUN, "ruby", "-Ilib", "-e", SERVER, port.to_s,
                      in: stdin_r, out: out_w, chdir: ROOT, pgroup: true)
  stdin_r.close
  out_w.close
  line = Timeout.timeout(30) { out_r.gets }
  raise "server for #{selector} did not start" unless line&.start_with?("READY")

  used = line.split[2]
  raise "#{selector}: server runs on #{used}" unless used.end_with?(selector == "Farce" ? "Farce::IOEventSelector" : selector)

  stats = lambda do
    stdin_w.puts("STAT")
    stdin_w.flush
    Timeout.timeout(10) { out_r.gets }.split.map(&:to_f)
  end
  yield port, stats
ensure
  stdin_w&.close
  if pid
    begin
      Timeout.timeout(10) { Process.wait(pid) }
    rescue Timeout::Error
      Process.kill(:KILL, -pid)
      Process.wait(pid)
    end
  end
end

def wrk(port, connections, duration)
  threads = [connections, 2].min
  out = `wrk -t#{threads} -c#{connections} -d#{duration}s --latency http://127.0.0.1:#{port}/ 2>&1`
  rps = out[/Requests\/sec:\s+([\d.]+)/, 1]&.to_f
  requests = out[/(\d+) requests in/, 1]&.to_i
  p99 = out[/^\s+99%\s+(\S+)/, 1]
  p50 = out[/^\s+50%\s+(\S+)/, 1]
  errors = out[/Socket errors:.*$/] || out[/Non-2xx.*$/]
  raise "wrk failed:\n#{out}" unless rps && p99 && requests&.positive?

  { rps: rps, requests: requests, p50: Bench::WrkTime.to_ms(p50), p99: Bench::WrkTime.to_ms(p99), errors: errors }
end

# Samples pid with perf while the block runs; returns { part => percent }.
def perf_profile(pid)
  data = File.join(ROOT, "tmp", "async_http.perf.data")
  FileUtils.mkdir_p(File.dirname(data))
  recorder = Process.spawn("perf", "record", "-q", "-F", "999", "-p", pid.to_s, "-o", data, out: File::NULL,
                           err: File::NULL)
  yield
  Process.kill(:INT, recorder)
  Process.wait(recorder)
  report = IO.popen(["perf", "report", "-i", data, "--symfs", SID_ROOT, "--sort", "dso", "-g", "none", "--stdio"],
                    err: File::NULL, &:read)
  parts = Hash.new(0.0)
  report.each_line do |line|
    percent, dso = line.strip.split(/\s+/, 2)
    next unless percent&.end_with?("%") && dso

    part = PERF_PARTS.find { |_, pattern| dso.strip.match?(pattern) }&.first || "other"
    parts[part] += percent.to_f
  end
  parts
ensure
  File.delete(data) if data && File.exist?(data)
end

def http_run(selector, connections, profile: false)
  with_server(selector) do |port, stats|
    wrk(port, connections, 2) # warm-up: connections, JIT-less VM caches, heap growth
    before = stats.call
    r = nil
    parts = nil
    if profile
      parts = perf_profile(before[4].to_i) { r = wrk(port, connections, DURATION) }
    else
      r = wrk(port, connections, DURATION)
    end
    after = stats.call
    cpu, gc_ms, majors = after.zip(before).map { |a, b| a - b }
    r.merge(cpu_us: cpu * 1e6 / r[:requests], gc_us: gc_ms * 1e3 / r[:requests],
            majors_per_k: majors * 1000.0 / r[:requests], perf: parts)
  end
end

def workload_run(selector, script_args)
  out = IO.popen({ "IO_EVENT_SELECTOR" => selector },
                 [SID_RUN, "ruby", "-Ilib", "-rfarce/io_event", "bench/workloads.rb", "async", *script_args, "seconds=2"],
                 chdir: ROOT, err: File::NULL, &:read)
  JSON.parse(out.lines.last).dig("result", "round_trips_per_second") or raise "no result from #{script_args.inspect}"
end

def median(values)
  sorted = values.compact.sort
  n = sorted.size
  n.odd? ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
end

http = Hash.new { |h, k| h[k] = [] }
work = Hash.new { |h, k| h[k] = [] }
ROUNDS.times do |round|
  order = round.even? ? SELECTORS : SELECTORS.reverse
  CONNECTIONS.each do |connections|
    order.each do |selector|
      r = http_run(selector, connections, profile: PERF && round.zero?)
      http[[selector, connections]] << r
      warn format("round %d %-5s c=%-5d %8.0f req/s  p50 %7.2f ms  p99 %8.2f ms  cpu %5.1f us/req  gc %5.1f us/req  " \
                  "major GCs %4.2f/1k req%s", round + 1, selector, connections, r[:rps], r[:p50], r[:p99],
                  r[:cpu_us], r[:gc_us], r[:majors_per_k], r[:errors] ? "  (#{r[:errors]})" : "")
    end
  end
  next if ENV["BENCH_SKIP_WORKLOADS"] == "1"

  WORKLOADS.each do |label, *args|
    order.each do |selector|
      rate = workload_run(selector, args)
      work[[selector, label]] << rate
      warn format("round %d %-5s %-20s %9d round trips/s", round + 1, selector, label, rate)
    end
  end
end

lines = []
lines << "Async 2.46 on IO_EVENT_SELECTOR=Farce vs io-event's EPoll selector, Ruby 3.3, medians of #{ROUNDS} alternating rounds"
lines << ""
lines << "async-http hello app (examples/async_http_app.rb), wrk #{DURATION}s; cpu and gc are the server's per request"
lines << format("%-6s %-6s %9s %8s %9s %11s %10s %13s", "conns", "sel", "req/s", "p50 ms", "p99 ms", "cpu us/req",
                "gc us/req", "major GC/1k")
CONNECTIONS.each do |connections|
  med = SELECTORS.to_h do |selector|
    runs = http[[selector, connections]]
    [selector, %i[rps p50 p99 cpu_us gc_us majors_per_k].to_h { |k| [k, median(runs.map { |r| r[k] })] }]
  end
  med.each do |selector, m|
    lines << format("%-6d %-6s %9.0f %8.2f %9.2f %11.1f %10.1f %13.2f", connections, selector, m[:rps], m[:p50], m[:p99],
                    m[:cpu_us], m[:gc_us], m[:majors_per_k])
  end
  f = med["Farce"]
  e = med["EPoll"]
  lines << format("%-6d Farce/EPoll: req/s %.2fx, p99 %.2fx, cpu per request %.2fx (lower is better for the last two)",
                  connections, f[:rps] / e[:rps], f[:p99] / e[:p99], f[:cpu_us] / e[:cpu_us])
end
profiles = http.select { |_, runs| runs.first[:perf] }
unless profiles.empty?
  parts = PERF_PARTS.keys + ["other"]
  lines << ""
  lines << "where the server's CPU goes (perf samples during round 1's wrk run, % of the server's samples)"
  lines << format("%-6s %-6s %s", "conns", "sel", parts.map { |p| format("%9s", p) }.join)
  profiles.sort_by { |(selector, connections), _| [connections, selector] }.each do |(selector, connections), runs|
    shares = runs.first[:perf]
    lines << format("%-6d %-6s %s", connections, selector, parts.map { |p| format("%8.1f%%", shares[p]) }.join)
  end
  lines << "A selector can win at most its own share: the rest is the same Ruby and kernel work under either."
end
unless work.empty?
  lines << ""
  lines << "selector-bound workloads (bench/workloads.rb under Async, 2 s each), round trips/s"
  WORKLOADS.each do |label, *|
    f = median(work[["Farce", label]])
    e = median(work[["EPoll", label]])
    lines << format("%-22s Farce %9d  EPoll %9d  Farce/EPoll %.2fx", label, f, e, f.to_f / e)
  end
end

puts
puts lines
# committed beside bench/README.md (which bench/runner.rb regenerates)
File.write(File.join(ROOT, "bench", "async_http.txt"), lines.join("\n") + "\n")
