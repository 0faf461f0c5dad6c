# frozen_string_literal: true

# Real Falcon (`falcon serve --forked`, from the peers' folder, as
# test:peers runs it) serving bench/falcon_hello.ru on IO_EVENT_SELECTOR=Farce
# against io-event's own EPoll selector, Ruby 3.3 in the sid chroot, under
# wrk from the host; the two selectors alternate which goes first in each
# round:
#
#   FARCE_PEER_SUITES=DIR ruby bench/falcon_serve.rb      # or: rake bench:falcon
#
# Placement: on a machine with 2+ CPUs the server (master and workers) is
# pinned to all CPUs but the last and wrk to the last, one worker per
# server CPU, so that the load generator never takes the server's CPU; on
# 2 cores that is one worker. Each figure is the median over the rounds;
# the ratio is the median of each round's Farce/EPoll ratio. CPU per
# request is the whole server's (every process of its group) over the wrk
# run, divided by the requests wrk counted.
#
# Knobs: BENCH_ROUNDS (3), BENCH_DURATION (wrk seconds, 10), BENCH_WARMUP
# (seconds of wrk before each measured run, 2), BENCH_CONNECTIONS ("64 1000"),
# BENCH_FALCON_WORKERS (workers; default one per server CPU), BENCH_PIN=0 (no
# pinning: the workers default to one per CPU), BENCH_SID_RUN, BENCH_NO_COMPILE=1.
# Writes bench/results/falcon_serve.json.
require "json"
require "time"
require "etc"
require "fileutils"
require "net/http"
require_relative "lib/free_port"
require_relative "lib/wrk_output"

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
    CLOCK_TICKS = Etc.sysconf(Etc::SC_CLK_TCK)

    def initialize
      @rounds = Integer(ENV.fetch("BENCH_ROUNDS", "3"))
      @duration = Integer(ENV.fetch("BENCH_DURATION", "10"))
      @warmup = Integer(ENV.fetch("BENCH_WARMUP", "2"))
      @connections = ENV.fetch("BENCH_CONNECTIONS", "64 1000").split.map { |c| Integer(c) }
      suites = ENV["FARCE_PEER_SUITES"].to_s
      abort "bench:falcon: FARCE_PEER_SUITES must name the peers' folder (it holds falcon-VERSION/)" unless File.directory?(suites)
      @suites = File.realpath(suites)
      @falcon = newest(suites, "falcon")
      # Falcon's own gems beside it, as test:peers' serving check loads them
      @rubylib = [@falcon, newest(suites, "async-utilization"), newest(suites, "async-http-cache")].map { |d| File.join(d, "lib") }.join(":")
      pin = ENV["BENCH_PIN"] != "0" && Etc.nprocessors >= 2 && system("command -v taskset >/dev/null")
      last = Etc.nprocessors - 1
      @server_pin = pin ? ["taskset", "-c", last == 1 ? "0" : "0-#{last - 1}"] : []
      @wrk_pin = pin ? ["taskset", "-c", last.to_s] : []
      @workers = Integer(ENV.fetch("BENCH_FALCON_WORKERS", (pin ? last : Etc.nprocessors).to_s))
      @logs = File.join(ROOT, "tmp", "falcon-serve")
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
      puts "bench:falcon: #{File.basename(@falcon)} --forked -n #{@workers}, Ruby 3.3, #{@rounds} rounds of " \
           "#{@duration} s per connection count, server #{@server_pin.empty? ? 'unpinned' : "on CPUs #{@server_pin.last}"}, " \
           "wrk -t1 #{@wrk_pin.empty? ? 'unpinned' : "on CPU #{@wrk_pin.last}"}"
      raw = Hash.new { |h, k| h[k] = Hash.new { |h2, k2| h2[k2] = [] } }
      @rounds.times do |round|
        SELECTORS.rotate(round).each do |selector|
          with_server(selector) do |port, pgid|
            @connections.each do |c|
              result = measure(port, pgid, c)
              raw[c][selector] << result
              puts format("  round %d %-5s %5d conns: %8.0f req/s, p99 %7.2f ms, %6.1f us CPU/request, wrk %3.0f%% CPU%s",
                          round + 1, selector, c, result["requests_per_second"], result["latency_p99_ms"].to_f,
                          result["cpu_us_per_request"].to_f, result["wrk_cpu_pct"].to_f,
                          result["errors"].to_i.positive? ? ", #{result['errors']} errors" : "")
            end
          end
        end
      end
      report(raw)
    end

    # Starts falcon serve for the selector; yields its port and process group.
    def with_server(selector)
      port = Bench.free_port
      log = File.join(@logs, "#{selector.downcase}.log")
      # sid-run drops RUBYLIB, RUBYOPT and BUNDLE_GEMFILE (host paths): they
      # are set inside. A BUNDLE_GEMFILE naming no file keeps Falcon's
      # controller from finding farce's Gemfile above the working directory.
      inner = ["env", "RUBYLIB=#{@rubylib}", "IO_EVENT_SELECTOR=#{selector}", "BUNDLE_GEMFILE=#{File.join(@logs, 'no-Gemfile')}",
               "CONSOLE_LEVEL=error"]
      inner << "RUBYOPT=-I#{File.join(ROOT, 'lib')} -rfarce/io_event" if selector == "Farce"
      _soft, hard = Process.getrlimit(:NOFILE)
      pid = Process.spawn({ "SID_RUBY" => "3.3", "SID_BIND" => @suites }, *@server_pin, SID_RUN, *inner, "ruby",
                          File.join(@falcon, "bin", "falcon"), "serve", "--forked", "-n", @workers.to_s,
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

    def wrk(port, connections, seconds, latency: false)
      before = Process.times
      out = IO.popen([*@wrk_pin, "wrk", "-t1", "-c#{connections}", "-d#{seconds}s", "--timeout", "10s",
                      *(latency ? ["--latency"] : []), "http://127.0.0.1:#{port}/"], err: %i[child out], &:read)
      after = Process.times
      raise "bench:falcon: wrk failed:\n#{out}" unless $?.success?

      [out, (after.cutime + after.cstime) - (before.cutime + before.cstime)]
    end

    def measure(port, pgid, connections)
      wrk(port, connections, @warmup) if @warmup.positive?
      cpu_before = group_cpu(pgid)
      started = now
      out, wrk_cpu = wrk(port, connections, @duration, latency: true)
      wall = now - started
      cpu = group_cpu(pgid) - cpu_before
      result = WrkOutput.parse(out)
      requests = result["requests"]
      result["cpu_us_per_request"] = requests.positive? ? (cpu / requests * 1e6).round(1) : nil
      result["server_cpu_pct"] = (cpu / wall * 100).round(1)
      result["wrk_cpu_pct"] = (wrk_cpu / wall * 100).round(1)
      result["errors"] = result["socket_errors"].to_i + result["non_2xx"].to_i
      result
    end

    def median(values)
      sorted = values.compact.sort
      return nil if sorted.empty?

      mid = sorted.size / 2
      sorted.size.odd? ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2.0
    end

    def report(raw)
      rows = @connections.map do |c|
        farce = raw[c]["Farce"]
        epoll = raw[c]["EPoll"]
        ratios = farce.zip(epoll).map { |f, e| f["requests_per_second"].fdiv(e["requests_per_second"]) }
        { "connections" => c, "ratio" => median(ratios)&.round(3), "ratio_min" => ratios.min&.round(3),
          "ratio_max" => ratios.max&.round(3),
          "Farce" => summarize(farce), "EPoll" => summarize(epoll) }
      end
      puts "\nbench:falcon: real Falcon (--forked -n #{@workers}) on Farce against io-event's EPoll, Ruby 3.3, " \
           "medians of #{@rounds} alternating rounds"
      puts "| connections | Farce req/s | EPoll req/s | Farce ÷ EPoll (min-max) | p99 Farce | p99 EPoll | CPU/request Farce | CPU/request EPoll |"
      puts "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
      rows.each do |r|
        f = r["Farce"]
        e = r["EPoll"]
        puts format("| %d | %.0f | %.0f | %.2fx (%.2f-%.2f) | %.2f ms | %.2f ms | %.1f us | %.1f us |", r["connections"],
                    f["requests_per_second"], e["requests_per_second"], r["ratio"], r["ratio_min"], r["ratio_max"],
                    f["latency_p99_ms"], e["latency_p99_ms"], f["cpu_us_per_request"], e["cpu_us_per_request"])
      end
      wrk_bound = raw.values.flat_map(&:values).flatten.count { |r| r["wrk_cpu_pct"].to_f >= 90 }
      puts "note: wrk used 90% of its CPU or more in #{wrk_bound} runs: there the load generator set the rate" if wrk_bound.positive?
      FileUtils.mkdir_p(RESULTS)
      File.write(File.join(RESULTS, "falcon_serve.json"),
                 JSON.pretty_generate("generated_at" => Time.now.utc.iso8601, "falcon" => File.basename(@falcon),
                                      "workers" => @workers, "rounds" => @rounds,
                                      "duration" => @duration, "server_pin" => @server_pin.last, "wrk_pin" => @wrk_pin.last,
                                      "load_average" => File.read("/proc/loadavg").split[0, 3].join(" "),
                                      "rows" => rows, "raw" => raw))
    end

    def summarize(results)
      %w[requests_per_second latency_p99_ms cpu_us_per_request server_cpu_pct wrk_cpu_pct].to_h do |key|
        [key, median(results.map { |r| r[key] })]
      end
    end
  end
end

Bench::FalconServe.new.main if $PROGRAM_NAME == __FILE__
