# frozen_string_literal: true

# Real Falcon (`falcon serve --forked`, from the peers' folder, as
# test:peers runs it) serving bench/falcon_hello.ru on IO_EVENT_SELECTOR=Farce
# against io-event's own EPoll selector, Ruby 3.3 in the sid chroot, under
# wrk from the host, in two layouts measured in the same run; the layouts and
# the two selectors alternate which goes first in each round:
#
#   FARCE_PEER_SUITES=DIR ruby bench/falcon_serve.rb      # or: rake bench:falcon
#
# The layouts (BENCH_FALCON_LAYOUTS="pinned,per-cpu", the default, runs both):
#   pinned   the server (master and workers) on every CPU but the last, wrk on
#            the last, one worker per server CPU: the load generator never takes
#            the server's CPU; on 2 cores, one worker.
#   per-cpu  nothing pinned, a worker per CPU: the layout production runs, where
#            the workers, their Go threads and wrk share the CPUs as the kernel
#            places them.
# Each figure is the median over the rounds; the ratios are the medians of each
# round's Farce/EPoll ratio. CPU per request is the whole server's (every
# process of its group) over the steady part of the run, once wrk holds all
# its connections open (bench/lib/steady_window.rb), divided by the requests
# the server received meanwhile; the whole run's, over the requests wrk
# counted, where there is no such part. For Farce the workers' CPU is split by
# thread into the Go runtime's and the rest (bench/lib/group_threads.rb says
# how Go's threads are told apart). wrk's errors are counted, and so are the
# connections the kernel holds open at the server when the steady part begins
# and ends: the fewest says whether wrk held all it was asked for.
#
# Knobs: BENCH_ROUNDS (3), BENCH_DURATION (wrk seconds, 10), BENCH_WARMUP
# (seconds of wrk before each measured run, 2), BENCH_CONNECTIONS ("64 1000 4000"),
# BENCH_FALCON_LAYOUTS, BENCH_FALCON_WORKERS (workers in every layout; default as
# above), BENCH_PIN=0 (no pinning: the per-cpu layout only), BENCH_SID_RUN,
# BENCH_NO_COMPILE=1. Writes bench/results/falcon_serve.json.
require "json"
require "time"
require "etc"
require "fileutils"
require "net/http"
require_relative "lib/free_port"
require_relative "lib/wrk_output"
require_relative "lib/steady_window"
require_relative "lib/descriptor_limit"
require_relative "lib/group_threads"
require_relative "lib/falcon_table"

module Bench
  class FalconServe
    ROOT = File.expand_path("..", __dir__)
    APP = File.join(ROOT, "bench", "falcon_hello.ru")
    RESULTS = File.join(ROOT, "bench", "results")
    SID_RUN = ENV["BENCH_SID_RUN"] || File.join(ROOT, ".ci", "sid-run")
    SELECTORS = %w[Farce EPoll].freeze
    # what /selector answers under each (the class of Async's selector)
    SELECTOR_CLASSES = { "Farce" => "Farce::IOEventSelector", "EPoll" => "IO::Event::Selector::EPoll" }.freeze
    START_TIMEOUT = 60
    STOP_TIMEOUT = 10
    DRAIN_S = 30 # how long the server may take to close a warm-up's connections
    CLOCK_TICKS = Etc.sysconf(Etc::SC_CLK_TCK)

    Layout = Struct.new(:name, :server_pin, :wrk_pin, :workers)

    def initialize
      @rounds = Integer(ENV.fetch("BENCH_ROUNDS", "3"))
      @duration = Integer(ENV.fetch("BENCH_DURATION", "10"))
      @warmup = Integer(ENV.fetch("BENCH_WARMUP", "2"))
      @connections = ENV.fetch("BENCH_CONNECTIONS", "64 1000 4000").split.map { |c| Integer(c) }
      suites = ENV["FARCE_PEER_SUITES"].to_s
      abort "bench:falcon: FARCE_PEER_SUITES must name the peers' folder (it holds falcon-VERSION/)" unless File.directory?(suites)
      @suites = File.realpath(suites)
      @falcon = newest(suites, "falcon")
      # Falcon's own gems beside it, as test:peers' serving check loads them
      @rubylib = [@falcon, newest(suites, "async-utilization"), newest(suites, "async-http-cache")].map { |d| File.join(d, "lib") }.join(":")
      @layouts = layouts
      @logs = File.join(ROOT, "tmp", "falcon-serve")
    end

    def layouts
      n = Etc.nprocessors
      wanted = ENV.fetch("BENCH_FALCON_LAYOUTS", "pinned,per-cpu").split(",").map(&:strip)
      unknown = wanted - %w[pinned per-cpu]
      abort "bench:falcon: BENCH_FALCON_LAYOUTS: no layout #{unknown.join(', ')} (pinned, per-cpu)" unless unknown.empty?
      workers = ->(default) { Integer(ENV.fetch("BENCH_FALCON_WORKERS", default.to_s)) }
      list = []
      if wanted.include?("pinned")
        if ENV["BENCH_PIN"] != "0" && n >= 2 && system("command -v taskset >/dev/null")
          last = n - 1
          list << Layout.new("pinned", ["taskset", "-c", last == 1 ? "0" : "0-#{last - 1}"], ["taskset", "-c", last.to_s],
                             workers.call(last))
        else
          warn "bench:falcon: no pinned layout (BENCH_PIN=0, one CPU, or no taskset)"
        end
      end
      list << Layout.new("per-cpu", [], [], workers.call(n)) if wanted.include?("per-cpu")
      abort "bench:falcon: no layout to run" if list.empty?
      list
    end

    def newest(base, name)
      dirs = Dir[File.join(base, "#{name}-[0-9]*")].select { |d| File.directory?(d) }.sort
      abort "bench:falcon: no #{name}-VERSION folder in #{base}" if dirs.empty?
      File.realpath(dirs.last)
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def main
      FileUtils.mkdir_p(@logs)
      unless ENV["BENCH_NO_COMPILE"] == "1"
        system({ "SID_RUBY" => "3.3" }, SID_RUN, "rake", "compile", chdir: ROOT, out: File::NULL) ||
          abort("bench:falcon: rake compile for Ruby 3.3 failed")
      end
      # wrk and the server each hold every connection (and the server inherits this)
      limit = DescriptorLimit.raise_to(@connections.max + 1024)
      warn "bench:falcon: only #{limit} descriptors per process: wrk cannot hold #{@connections.max} connections" if limit < @connections.max + 64
      puts "bench:falcon: #{File.basename(@falcon)} --forked, Ruby 3.3, #{@rounds} rounds of #{@duration} s per connection count " \
           "(after #{@warmup} s of warm-up), wrk -t1; layouts: #{@layouts.map { |l| FalconTable.title(describe(l)) }.join('; ')}"
      raw = @layouts.to_h { |l| [l.name, Hash.new { |h, k| h[k] = Hash.new { |h2, k2| h2[k2] = [] } }] }
      @rounds.times do |round|
        @layouts.rotate(round).each do |layout|
          SELECTORS.rotate(round).each do |selector|
            with_server(layout, selector) do |port, pgid|
              @connections.each do |c|
                result = measure(layout, port, pgid, c)
                raw[layout.name][c][selector] << result
                print_run(round, layout, selector, c, result)
              end
            end
          end
        end
      end
      report(raw)
    end

    def print_run(round, layout, selector, connections, result)
      puts format("  round %d %-7s %-5s %5d conns: %8.0f req/s, p99 %8.2f ms, %6.1f us CPU/request%s, wrk %3.0f%% CPU, " \
                  "%d open%s", round + 1, layout.name, selector, connections, result["requests_per_second"],
                  result["latency_p99_ms"].to_f, result["cpu_us_per_request"].to_f,
                  result["go_threads"].to_i.positive? ? format(" (Go %.2f us, %.1f%%)", result["go_us_per_request"].to_f, result["go_share_pct"].to_f) : "",
                  result["wrk_cpu_pct"].to_f, result["connections_open"].to_i,
                  [(", no steady part: CPU over the whole run" unless result["window_s"]),
                   (", #{result['errors']} errors (#{result['error_detail']})" if result["errors"].to_i.positive?)].join)
    end

    def describe(layout)
      { "name" => layout.name, "workers" => layout.workers, "server_pin" => layout.server_pin.last,
        "wrk_pin" => layout.wrk_pin.last }
    end

    # Starts falcon serve for the selector in the layout; yields its port and process group.
    def with_server(layout, selector)
      port = Bench.free_port
      log = File.join(@logs, "#{layout.name}-#{selector.downcase}.log")
      # sid-run drops RUBYLIB, RUBYOPT and BUNDLE_GEMFILE (host paths): they
      # are set inside. A BUNDLE_GEMFILE naming no file keeps Falcon's
      # controller from finding farce's Gemfile above the working directory.
      inner = ["env", "RUBYLIB=#{@rubylib}", "IO_EVENT_SELECTOR=#{selector}", "BUNDLE_GEMFILE=#{File.join(@logs, 'no-Gemfile')}",
               "CONSOLE_LEVEL=error"]
      inner << "RUBYOPT=-I#{File.join(ROOT, 'lib')} -rfarce/io_event" if selector == "Farce"
      _soft, hard = Process.getrlimit(:NOFILE)
      pid = Process.spawn({ "SID_RUBY" => "3.3", "SID_BIND" => @suites }, *layout.server_pin, SID_RUN, *inner, "ruby",
                          File.join(@falcon, "bin", "falcon"), "serve", "--forked", "-n", layout.workers.to_s,
                          "-b", "http://127.0.0.1:#{port}", "-c", APP,
                          chdir: ROOT, in: File::NULL, out: log, err: %i[child out], pgroup: true, rlimit_nofile: hard)
      begin
        wait_ready(port, pid, log)
        used = get(port, "/selector")
        raise "bench:falcon: #{selector} asked, the worker runs on #{used.inspect}" unless used == SELECTOR_CLASSES[selector]

        yield port, pid
      ensure
        stop(pid)
      end
    end

    def get(port, path)
      Net::HTTP.start("127.0.0.1", port, open_timeout: 2, read_timeout: 5) { |h| h.get(path).body }
    end

    def wait_ready(port, pid, log)
      deadline = now + START_TIMEOUT
      loop do
        return if (get(port, "/") rescue nil) == "Hello, world!"
        raise "bench:falcon: falcon serve exited before it answered; see #{log}" if Process.wait2(pid, Process::WNOHANG)
        raise "bench:falcon: no answer within #{START_TIMEOUT} s; see #{log}" if now > deadline

        sleep 0.2
      end
    end

    def stop(pid)
      Process.kill(:INT, -pid)
      deadline = now + STOP_TIMEOUT
      sleep 0.1 until Process.wait2(pid, Process::WNOHANG) || now > deadline
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    ensure
      begin
        Process.kill(:KILL, -pid)
      rescue Errno::ESRCH
        nil
      end
      Process.wait(pid) rescue nil
    end

    # Seconds of CPU every process of the group has used so far.
    def group_cpu(pgid)
      Dir["/proc/[0-9]*/stat"].sum do |path|
        fields = File.read(path).sub(/\A\d+ \(.*\) /m, "").split
        Integer(fields[2]) == pgid ? (Integer(fields[11]) + Integer(fields[12])).fdiv(CLOCK_TICKS) : 0
      rescue Errno::ENOENT, Errno::ESRCH, ArgumentError
        0
      end
    end

    def wrk(layout, port, connections, seconds, latency: false)
      before = Process.times
      out = IO.popen([*layout.wrk_pin, "wrk", "-t1", "-c#{connections}", "-d#{seconds}s", "--timeout", "10s",
                      *(latency ? ["--latency"] : []), "http://127.0.0.1:#{port}/"], err: %i[child out], &:read)
      after = Process.times
      raise "bench:falcon: wrk failed:\n#{out}" unless $?.success?

      [out, (after.cutime + after.cstime) - (before.cutime + before.cstime)]
    end

    def measure(layout, port, pgid, connections)
      if @warmup.positive?
        wrk(layout, port, connections, @warmup)
        left = TcpCensus.drain(port, DRAIN_S) # the warm-up's closing stays out of the measured run
        warn "bench:falcon: #{left} connections of the warm-up still open #{DRAIN_S} s after it" if left.positive?
      end
      sample = -> { [group_cpu(pgid), GroupThreads.sample(pgid)] }
      whole_before = sample.call
      started = now
      run = Thread.new { wrk(layout, port, connections, @duration, latency: true) }
      window = SteadyWindow.new(port, connections, @duration, &sample).watch(run, started)
      out, wrk_cpu = run.value
      wall = now - started
      result = WrkOutput.parse(out)
      # the steady part when there is one (bench/lib/steady_window.rb), else the whole run
      before, after, seconds, requests = if window.requests.to_i.positive?
                                           result["window_s"] = window.seconds.round(2)
                                           [window.before, window.after, window.seconds, window.requests]
                                         else
                                           result["window_s"] = nil
                                           [whole_before, sample.call, wall, result["requests"]]
                                         end
      cpu = after[0] - before[0]
      split = GroupThreads.workers_cpu(before[1], after[1])
      per_request = ->(secs) { requests.positive? ? (secs / requests * 1e6).round(2) : nil }
      result["cpu_us_per_request"] = per_request.call(cpu)&.round(1)
      result["server_cpu_pct"] = (cpu / seconds * 100).round(1)
      result["wrk_cpu_pct"] = (wrk_cpu / wall * 100).round(1)
      result["errors"] = result["socket_errors"].to_i + result["non_2xx"].to_i
      result["error_detail"] = out[/^\s*Socket errors:.*$/].to_s.strip.then { |s| s.empty? ? nil : s }
      result["connections_open"] = window.open&.min
      result["go_threads"] = split[:go_threads]
      result["go_us_per_request"] = per_request.call(split[:go] / 1e9)
      result["go_share_pct"] = split[:all].positive? ? (split[:go] * 100.0 / split[:all]).round(2) : nil
      result
    end

    def median(values)
      sorted = values.compact.sort
      return nil if sorted.empty?

      mid = sorted.size / 2
      sorted.size.odd? ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2.0
    end

    # Each round's Farce ÷ EPoll of one figure.
    def round_ratios(farce, epoll, key)
      farce.zip(epoll).filter_map { |f, e| f && e && e[key].to_f.positive? ? f[key].to_f / e[key] : nil }
    end

    def rows(raw)
      @connections.map do |c|
        farce = raw[c]["Farce"]
        epoll = raw[c]["EPoll"]
        ratios = round_ratios(farce, epoll, "requests_per_second")
        { "connections" => c, "ratio" => median(ratios)&.round(3), "ratio_min" => ratios.min&.round(3),
          "ratio_max" => ratios.max&.round(3), "cpu_ratio" => median(round_ratios(farce, epoll, "cpu_us_per_request"))&.round(3),
          "Farce" => summarize(farce), "EPoll" => summarize(epoll) }
      end
    end

    def report(raw)
      layouts = @layouts.map { |l| describe(l).merge("rows" => rows(raw[l.name]), "raw" => raw[l.name]) }
      puts "\nbench:falcon: real Falcon on Farce against io-event's EPoll, Ruby 3.3, medians of #{@rounds} alternating " \
           "rounds; CPU ÷ is the median of each round's Farce ÷ EPoll; open: the fewest connections the kernel held at the " \
           "server when the steady part began and ended"
      layouts.each do |layout|
        puts "", FalconTable.title(layout), *FalconTable.lines(layout)
      end
      runs = raw.values.flat_map(&:values).flat_map(&:values).flatten
      wrk_bound = runs.count { |r| r["wrk_cpu_pct"].to_f >= 90 }
      puts "note: wrk used 90% of its CPU or more in #{wrk_bound} runs: there the load generator set the rate" if wrk_bound.positive?
      failed = runs.count { |r| r["errors"].to_i.positive? }
      puts "note: wrk reported errors in #{failed} runs (the per-round lines above say which)" if failed.positive?
      # EPoll's workers have no Go: a thread counted as Go's there means the split above is wrong
      misread = raw.values.flat_map(&:values).sum { |by| by["EPoll"].sum { |r| r["go_threads"].to_i } }
      puts "note: #{misread} threads of EPoll's workers were taken for Go's: the Go split is not to be trusted" if misread.positive?
      FileUtils.mkdir_p(RESULTS)
      File.write(File.join(RESULTS, "falcon_serve.json"),
                 JSON.pretty_generate("generated_at" => Time.now.utc.iso8601, "falcon" => File.basename(@falcon),
                                      "rounds" => @rounds, "duration" => @duration, "warmup" => @warmup,
                                      "load_average" => File.read("/proc/loadavg").split[0, 3].join(" "),
                                      "layouts" => layouts))
    end

    SUMMED = %w[errors].freeze # every error of every round, not a median that would hide them
    FEWEST = %w[connections_open].freeze

    def summarize(results)
      figures = %w[requests_per_second latency_p99_ms cpu_us_per_request server_cpu_pct wrk_cpu_pct go_us_per_request
                   go_share_pct go_threads errors connections_open].to_h do |key|
        values = results.map { |r| r[key] }
        [key, if SUMMED.include?(key) then values.compact.sum
              elsif FEWEST.include?(key) then values.compact.min
              else median(values)
              end]
      end
      # rounds whose CPU per request is over the whole run (no steady part)
      figures.merge("whole_run_rounds" => results.count { |r| r["window_s"].nil? })
    end
  end
end

Bench::FalconServe.new.main if $PROGRAM_NAME == __FILE__
