# frozen_string_literal: true

# Where a server's CPU goes, kernel included: the HTTP hello server of the
# bench's HTTP rows, run as the suite runs it (pinned to CPU 0, wrk -t1 on
# CPU 1, a warm-up first), sampled by `perf record` while wrk loads it, and
# the samples summed by the object they fell in: the kernel, Ruby (libruby,
# or the ruby binary of a static build), JIT code (YJIT's, in anonymous
# memory perf cannot name), farce's C, farce's Go core, io-event's C, libc.
# Each share is also given in µs per request: the share times the server's
# CPU per request (all its threads, as the suite's row counts it) over a wrk
# run of the same length just before the sampled one, since sampling makes
# every request dearer. bench/instructions.rb counts instructions instead, which
# load does not move, but it cannot see the kernel.
#
#   ruby bench/cpu_profile.rb CONTENDER WORKLOAD [SECONDS]
#     CONTENDER  as for bench/runner.rb: farce-epoll@3.3, async@3.3,
#                farce-epoll+RUBY_YJIT_ENABLE=1@4.0, async-epoll@4.0 (FARCE_PEER_SUITES), ...
#     WORKLOAD   http64 or http1000 (connections)
#     SECONDS    how long wrk loads the server while perf samples it (default 8)
#
# Needs perf (Debian's linux-perf) and permission to sample another process
# (root, or kernel.perf_event_paranoid at 2 or below for one's own).
require "rbconfig"
require "tmpdir"
require_relative "runner"

module Bench
  class CpuProfile
    WORKLOADS = { "http64" => 64, "http1000" => 1_000 }.freeze
    WARMUP = 2
    OBJECTS = [
      [/\A\[kernel|\A\[guest\.kernel/, "kernel"],
      [/\Alibfarce_core/, "farce's Go core"],
      [/\Afarce_ext/, "farce's C"],
      [/\AIO_Event|\Aio_event/i, "io-event's C"],
      [/\A(libruby|ruby)\b/, "Ruby"],
      [/\A(libc|ld-linux|libm|libpthread)[.-]|\A\[vdso\]/, "libc"],
      [/\A(\[unknown\]|\[anon|\/\/anon|perf-\d+\.map|\[JIT\])/, "JIT code or unknown"]
    ].freeze

    def initialize(contender, workload, seconds)
      raise ArgumentError, "workload: #{WORKLOADS.keys.join(', ')}, not #{workload.inspect}" unless WORKLOADS[workload]

      @contender = contender
      @connections = WORKLOADS[workload]
      @workload = workload
      @seconds = Integer(seconds || 8)
      raise ArgumentError, "SECONDS must be at least 3" if @seconds < 3

      @runner = Runner.new
    end

    def main
      @runner.which("perf") or abort "cpu_profile: perf not found (apt-get install linux-perf)"
      Dir.mktmpdir("farce-cpu-profile") do |dir|
        data = File.join(dir, "perf.data")
        plain, sampled = serve_sampled(data)
        shares = dso_shares(data)
        abort "cpu_profile: perf recorded no samples (perf_event_paranoid? #{perf_hint})" if shares.empty?

        print_report(plain, sampled, shares)
      end
    end

    private

    # Starts the server, warms it up, runs wrk for @seconds unsampled, then
    # for @seconds again with perf sampling the server (all its threads) for
    # all but the first and last half second. Returns [requests, server's CPU
    # µs per request] of each of the two runs.
    def serve_sampled(data)
      server_pin, wrk_pin = @runner.pin_prefixes
      io = IO.popen([*server_pin, *@runner.command(@contender, "http_hello.rb", "0")], "r+",
                    err: File::NULL, pgroup: true, chdir: Runner::ROOT)
      ready = IO.select([io], nil, nil, 60) && io.gets
      port = ready.to_s[/\AREADY (\d+)/, 1] or abort "cpu_profile: the server did not start: #{ready.inspect}"
      server_pid = Integer(ready.split[3])
      url = "http://127.0.0.1:#{port}/"
      wrk = ->(secs, *more) { @runner.capture([*wrk_pin, "wrk", "-t1", "-c#{@connections}", "-d#{secs}s", *more, url], secs + 60) }
      wrk.call(WARMUP, "--timeout", "10s") or abort "cpu_profile: wrk's warm-up failed"
      plain = cpu_per_request(server_pid) { wrk.call(@seconds, "--timeout", "10s") }
      sampled = cpu_per_request(server_pid) do
        load = Thread.new { wrk.call(@seconds, "--timeout", "10s") }
        sleep 0.5
        perf = ["perf", "record", "-q", "-F", "1999", "-p", server_pid.to_s, "-o", data, "--", "sleep", (@seconds - 1).to_s]
        system(*perf, out: File::NULL, err: File::NULL) or abort "cpu_profile: #{perf.join(' ')} failed"
        load.value
      end
      [plain, sampled]
    ensure
      if io
        io.close_write rescue nil # the server stops at the end of its stdin
        @runner.wait_or_kill(io.pid, 5)
        io.close rescue nil
      end
    end

    # The server's CPU (all its threads) per request over the wrk run the
    # block makes: [requests, µs per request].
    def cpu_per_request(server_pid)
      cpu0 = @runner.thread_cpu(server_pid).values.sum # every thread's run time, as the suite's row counts it
      out = yield or abort "cpu_profile: wrk failed"
      cpu_ns = @runner.thread_cpu(server_pid).values.sum - cpu0
      requests = WrkOutput.parse(out)["requests"].to_i
      abort "cpu_profile: wrk counted no requests" unless requests.positive?
      [requests, cpu_ns / 1e3 / requests]
    end

    # {label => share of the samples, 0..1}
    def dso_shares(data)
      by = Hash.new(0.0)
      IO.popen(["perf", "report", "-i", data, "--sort", "dso", "--stdio", "--percent-limit", "0"],
               err: File::NULL).each_line do |line|
        m = line.match(/\A\s*([\d.]+)%\s+(\S.*?)\s*\z/) or next
        by[label(File.basename(m[2]))] += m[1].to_f / 100
      end
      by
    end

    def label(object)
      OBJECTS.each { |re, name| return name if object.match?(re) }
      object
    end

    # The shares are perf's; the µs per request apply them to the unsampled
    # run's CPU per request (sampling makes every request dearer).
    def print_report((requests, cpu_us), (sampled_requests, sampled_us), shares)
      puts format("%s %s: server's CPU %.1f µs per request (%d requests in %d s; %.1f µs while perf sampled, %d requests)",
                  @contender, @workload, cpu_us, requests, @seconds, sampled_us, sampled_requests)
      shares.sort_by { |_, v| -v }.each do |name, share|
        puts format("  %-22s %5.1f%%  %6.2f µs", name, share * 100, share * cpu_us) if share >= 0.0005
      end
    end

    def perf_hint
      "kernel.perf_event_paranoid = #{File.read('/proc/sys/kernel/perf_event_paranoid').strip}"
    rescue SystemCallError
      "unknown"
    end
  end
end

if $PROGRAM_NAME == __FILE__
  abort "usage: ruby bench/cpu_profile.rb CONTENDER http64|http1000 [SECONDS]" if ARGV.size < 2
  Bench::CpuProfile.new(*ARGV.first(3)).main
end
