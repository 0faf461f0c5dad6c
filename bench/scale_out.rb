# frozen_string_literal: true

# Scale-out: the HTTP hello server in N Ractors of one process against the
# same server in N forked processes, N = 1 and the number of CPUs, under wrk,
# alternating rounds in one run (bench/scale_out_server.rb serves; each worker
# has its own listening socket on one port, SO_REUSEPORT). Per layout: req/s,
# the CPU per request of the whole server (every thread of its process group),
# and its resident memory in total (every process) at the end of the run.
#
#   ruby bench/scale_out.rb          (rake bench:scale_out; rake bench runs it after the suite)
#
# Environment: BENCH_SCALE_OUT_RUBY (default /opt/rubies/4.0/bin/ruby where it exists, else
# this Ruby), BENCH_ROUNDS (3), BENCH_DURATION (5 s of wrk per run, after 2 s of warm-up),
# BENCH_CONNECTIONS (128), FARCE_BACKEND (farce's default). Writes bench/results/scale_out.json.
require "json"
require "etc"
require "fileutils"
require "time"
require_relative "lib/free_port"
require_relative "lib/wrk_output"
require_relative "lib/group_threads"
require_relative "lib/harness" # Bench.farce_lib

module Bench
  class ScaleOut
    ROOT = File.expand_path("..", __dir__)
    RESULTS = File.join(ROOT, "bench", "results", "scale_out.json")
    SERVER = File.join(ROOT, "bench", "scale_out_server.rb")
    DEFAULT_RUBY = "/opt/rubies/4.0/bin/ruby"

    def initialize
      @ruby = ENV["BENCH_SCALE_OUT_RUBY"] || (File.executable?(DEFAULT_RUBY) ? DEFAULT_RUBY : RbConfig.ruby)
      @rounds = Integer(ENV.fetch("BENCH_ROUNDS", "3"))
      @seconds = Integer(ENV.fetch("BENCH_DURATION", "5"))
      @connections = Integer(ENV.fetch("BENCH_CONNECTIONS", "128"))
      wide = [Etc.nprocessors, 2].max
      @layouts = [["ractors", 1], ["ractors", wide], ["processes", 1], ["processes", wide]]
    end

    def main
      version = IO.popen([@ruby, "-e", "print RUBY_VERSION"], &:read)
      abi = version[/\A\d+\.\d+/]
      unless File.exist?(File.join(Bench.farce_lib, "farce", abi.to_s, "farce_ext.so"))
        abort "scale_out: farce is not built for Ruby #{version} (#{@ruby}) in #{Bench.farce_lib}: " \
              ".ci/ruby-run #{abi} rake compile"
      end
      runs = Hash.new { |h, k| h[k] = [] }
      @rounds.times do |round|
        # each round in another order, so that no layout always follows the same one
        @layouts.rotate(round).each do |mode, count|
          warn "scale_out: round #{round + 1}/#{@rounds}: #{mode} x#{count}"
          runs["#{mode} #{count}"] << measure(mode, count)
        end
      end
      rows = @layouts.map { |mode, count| summary(mode, count, runs["#{mode} #{count}"]) }
      data = { "generated_at" => Time.now.utc.iso8601, "ruby" => version, "ruby_path" => @ruby,
               "rounds" => @rounds, "duration" => @seconds, "connections" => @connections,
               "cpus" => Etc.nprocessors, "backend" => ENV["FARCE_BACKEND"], "rows" => rows, "runs" => runs }
      FileUtils.mkdir_p(File.dirname(RESULTS))
      File.write(RESULTS, JSON.pretty_generate(data))
      puts ScaleOut.table(data)
    end

    # One run of one layout: start the server, wait for every worker's
    # socket, warm up, measure, stop.
    def measure(mode, count)
      port = Bench.free_port
      io = IO.popen([@ruby, SERVER, mode, count.to_s, port.to_s], "r+", pgroup: true, err: File::NULL)
      pid = io.gets.to_s[/\AREADY (\d+)/, 1]&.to_i or raise "scale_out: the #{mode} server did not start"
      wait_listening(port, count)
      wrk(port, 2)
      before = GroupThreads.sample(pid)
      out = wrk(port, @seconds)
      after = GroupThreads.sample(pid)
      res = WrkOutput.parse(out)
      cpu_ns = cpu(after) - cpu(before)
      res.merge("cpu_us_per_request" => res["requests"].positive? ? (cpu_ns / 1000.0 / res["requests"]).round(2) : nil,
                "rss_mib" => (rss_kib(pid) / 1024.0).round(1))
    ensure
      if io
        io.close_write rescue nil
        Process.kill(:KILL, -pid) rescue nil if pid
        Process.wait(io.pid) rescue nil
        io.close rescue nil
      end
    end

    def wrk(port, seconds)
      IO.popen(["wrk", "-t2", "-c#{@connections}", "-d#{seconds}s", "--latency", "http://127.0.0.1:#{port}/"], &:read)
    end

    # Until the kernel lists count listening sockets on port (each worker
    # binds its own; a worker still starting would get no connections).
    def wait_listening(port, count, timeout = 60)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      hex = format(":%04X ", port)
      loop do
        listening = File.readlines("/proc/net/tcp").count { |l| l.split[1]&.end_with?(hex.strip) && l.split[3] == "0A" }
        return if listening >= count
        raise "scale_out: #{listening} of #{count} workers listen on #{port} after #{timeout} s" if
          Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.05
      end
    end

    def cpu(sample)
      sample[:threads].sum(&:ns)
    end

    # Resident memory of every process of the group, in KiB.
    def rss_kib(pgid)
      Dir.children("/proc").grep(/\A\d+\z/).sum do |pid|
        stat = File.read("/proc/#{pid}/stat").sub(/\A\d+ \(.*\) /m, "").split
        stat[2].to_i == pgid ? File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+)/, 1].to_i : 0
      rescue SystemCallError
        0
      end
    end

    def summary(mode, count, runs)
      median = ->(key) { vals = runs.map { |r| r[key] }.compact.sort; vals.empty? ? nil : vals[vals.size / 2] }
      { "mode" => mode, "workers" => count, "requests_per_second" => median.call("requests_per_second"),
        "cpu_us_per_request" => median.call("cpu_us_per_request"), "rss_mib" => median.call("rss_mib"),
        "errors" => runs.sum { |r| r["socket_errors"].to_i + r["non_2xx"].to_i } }
    end

    # The table and the issue's two ratios, from a results file's data.
    def self.table(data)
      rows = data["rows"]
      find = ->(mode, n) { rows.find { |r| r["mode"] == mode && r["workers"] == n } }
      wide = rows.map { |r| r["workers"] }.max
      lines = ["| layout | req/s | CPU per request (µs) | RSS in total (MiB) | errors |", "| --- | ---: | ---: | ---: | ---: |"]
      rows.each do |r|
        name = r["mode"] == "ractors" ? "#{r['workers']} Ractor#{r['workers'] == 1 ? '' : 's'} in one process" : "#{r['workers']} process#{r['workers'] == 1 ? '' : 'es'}"
        lines << "| #{name} | #{r['requests_per_second']} | #{r['cpu_us_per_request']} | #{r['rss_mib']} | #{r['errors']} |"
      end
      ratio = ->(a, b, key) { a && b && a[key] && b[key]&.positive? ? format("%.2f×", a[key].to_f / b[key]) : "—" }
      r1, rn, pn = find.call("ractors", 1), find.call("ractors", wide), find.call("processes", wide)
      lines << "" << "#{wide} Ractors ÷ 1 Ractor: #{ratio.call(rn, r1, 'requests_per_second')} the req/s; " \
                     "#{wide} Ractors ÷ #{wide} processes: #{ratio.call(rn, pn, 'requests_per_second')} the req/s, " \
                     "#{ratio.call(rn, pn, 'cpu_us_per_request')} the CPU per request, #{ratio.call(rn, pn, 'rss_mib')} the memory"
      lines.join("\n")
    end
  end
end

Bench::ScaleOut.new.main if $PROGRAM_NAME == __FILE__
