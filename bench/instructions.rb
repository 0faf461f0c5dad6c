# frozen_string_literal: true

# Instructions per round trip or per request, counted by callgrind: a figure
# that the machine's load does not move, for comparing trees, Rubies and
# contenders on a shared machine (docs/benchmarks.md). Each workload runs
# twice with different counts (a ping-pong of SMALL and LARGE round trips,
# or an HTTP server answering SMALL and LARGE requests from
# bench/lib/counted_client.rb), and the difference is divided by the
# difference in counts, so that start-up, connecting and shutting down cancel
# out. Every thread of the process is counted (Go's too); the kernel is not.
#
#   ruby bench/instructions.rb CONTENDER WORKLOAD [SMALL LARGE]
#     CONTENDER  as for bench/runner.rb: farce-epoll@3.3, farce-epoll+RUBY_YJIT_ENABLE=1@4.0,
#                async@3.3, async-epoll@4.0 (FARCE_PEER_SUITES), ...
#     WORKLOAD   ppsock (socketpair ping-pong), pp (pipes), http64, http1000 (connections)
#   CALLGRIND_OPTIONS="--cache-sim=yes --branch-sim=yes" adds the cache and branch models' events.
#
# Prints the instructions per unit by object (Ruby, farce's C, farce's Go
# core, libc, JIT code) and the functions that cost the most. Needs valgrind
# (apt-get install valgrind). callgrind runs with the Go runtime's
# preemption signals off (GODEBUG=asyncpreemptoff=1: callgrind 3.19 stops on
# them), and with YJIT's code checked for changes (--smc-check=all-non-file).
require "fileutils"
require "rbconfig"
require "tmpdir"
require_relative "runner"

module Bench
  class Instructions
    DEFAULTS = { "pp" => [20_000, 120_000], "ppsock" => [20_000, 120_000],
                 "http64" => [5_000, 25_000], "http1000" => [5_000, 25_000] }.freeze
    OBJECTS = { /\Alibfarce_core/ => "farce's Go core", /\Afarce_ext/ => "farce's C",
                /\A(ruby|libruby)/ => "Ruby", /\Alibc\.|\Ald-linux/ => "libc", /\A\?\?\?\z/ => "JIT code or unknown",
                /\A\?\z/ => "inlined (no object)" }.freeze

    def initialize(contender, workload, small, large)
      raise ArgumentError, "workload: #{DEFAULTS.keys.join(', ')}, not #{workload.inspect}" unless DEFAULTS[workload]

      @contender = contender
      @workload = workload
      @small, @large = small ? [Integer(small), Integer(large)] : DEFAULTS[workload]
      raise ArgumentError, "LARGE must exceed SMALL" unless @large > @small

      @runner = Runner.new
      @dir = File.join(Runner::ROOT, "tmp", "instructions")
      FileUtils.mkdir_p(@dir)
    end

    def main
      valgrind = which_valgrind
      counts = [@small, @large].map { |n| count(valgrind, n) }
      unit = @workload.start_with?("http") ? "request" : "round trip"
      per = diff(*counts, @large - @small)
      total = per.values.sum
      puts format("%s %s: %.0f instructions per %s", @contender, @workload, total, unit)
      all = events(*counts, @large - @small)
      puts "  events per #{unit}: #{all.map { |name, v| format('%s %.1f', name, v) }.join(', ')}" if all.size > 1
      by_object = Hash.new(0)
      per.each { |(object, _), v| by_object[label(object)] += v }
      by_object.sort_by { |_, v| -v }.each { |name, v| puts format("  %-22s %8.0f", name, v) if v.abs >= 1 }
      puts "top functions:"
      per.sort_by { |_, v| -v }.first(Integer(ENV.fetch("TOP", 25))).each do |(object, fn), v|
        puts format("  %8.0f  %-50s %s", v, fn, object)
      end
    ensure
      @runner&.instance_variable_get(:@restore)&.each(&:call)
    end

    private

    def label(object)
      OBJECTS.each { |re, name| return name if object.match?(re) }
      object
    end

    # The valgrind to run: the host's, or (for a Ruby in the sid chroot,
    # which has no valgrind) a copy of its launcher in this checkout's tmp/,
    # which the chroot sees, with the tools' folder bound in (SID_BIND).
    def which_valgrind
      host = @runner.which("valgrind") or abort "instructions: valgrind not found (apt-get install valgrind)"
      return host if @runner.other_rubies[ver] || ver == Runner::RUBY_ABI

      %w[valgrind valgrind.bin].each do |bin|
        src = File.join(File.dirname(host), bin)
        FileUtils.cp(src, File.join(@dir, bin)) if File.exist?(src)
      end
      File.join(@dir, "valgrind")
    end

    def ver
      @runner.parse_contender(@contender)[2]
    end

    def callgrind_args(out)
      [*ENV.fetch("CALLGRIND_OPTIONS", "").split, "--tool=callgrind", "--smc-check=all-non-file",
       "--callgrind-out-file=#{out}"]
    end

    # The contender's command with valgrind in front of its Ruby.
    def command_under(valgrind, out, script, *args)
      cmd = @runner.command(@contender, script, *args)
      ruby = @runner.ruby_command(ver).last
      at = cmd.index(ruby) or raise "instructions: no #{ruby} in #{cmd.inspect}"
      cmd.insert(at, valgrind, *callgrind_args(out))
      return cmd if @runner.other_rubies[ver] || ver == Runner::RUBY_ABI

      bind = cmd.index { |a| a.start_with?("SID_BIND=") }
      bind ? cmd[bind] += ":#{valgrind_tools}" : cmd.unshift("env", "SID_BIND=#{valgrind_tools}")
      cmd
    end

    def valgrind_tools
      Dir["/usr/libexec/valgrind", "/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib/valgrind"].find { |d| File.directory?(d) } ||
        "/usr/libexec/valgrind"
    end

    # Runs the workload once with n round trips or requests; returns the
    # callgrind file.
    def count(valgrind, n)
      out = File.join(@dir, "#{@contender.gsub(/[^A-Za-z0-9.-]/, '_')}.#{@workload}.#{n}.out")
      File.delete(out) if File.exist?(out)
      env = { "GODEBUG" => "asyncpreemptoff=1" }
      if @workload.start_with?("http")
        serve(env, command_under(valgrind, out, "http_hello.rb", "0"), n)
      else
        cmd = command_under(valgrind, out, "lib/counted_pingpong.rb", n, @workload == "ppsock" ? "socket" : "pipe")
        system(env, *cmd, chdir: Runner::ROOT, out: File::NULL, err: File::NULL) or abort "instructions: #{cmd.join(' ')} failed"
      end
      abort "instructions: callgrind wrote no #{out}" unless File.exist?(out)
      out
    end

    def serve(env, cmd, n)
      io = IO.popen(env, cmd, "r+", chdir: Runner::ROOT, err: File::NULL)
      ready = IO.select([io], nil, nil, 300) && io.gets
      port = ready.to_s[/\AREADY (\d+)/, 1] or abort "instructions: the server did not start: #{ready.inspect}"
      conns = Integer(@workload.delete_prefix("http"))
      client = [RbConfig.ruby, File.join(Runner::BENCH, "lib", "counted_client.rb"), port, conns.to_s, n.to_s]
      system(*client, out: File::NULL) or abort "instructions: the client failed"
    ensure
      if io
        io.close_write rescue nil # the server stops at the end of its stdin
        Process.wait(io.pid) rescue nil
        io.close rescue nil
      end
    end

    # Every event the file counted ("Ir", and with CALLGRIND_OPTIONS' models
    # "D1mr", "Bim", ...) per unit between two files, from their summary lines.
    def events(small, large, units)
      names, a = summary(small)
      _, b = summary(large)
      names.each_with_index.to_h { |name, i| [name, (b[i] - a[i]).to_f / units] }
    end

    def summary(file)
      text = File.read(file)
      [text[/^events: (.*)$/, 1].to_s.split, text[/^summary: (.*)$/, 1].to_s.split.map(&:to_i)]
    end

    # {[object, function] => instructions per unit} between two files.
    def diff(small, large, units)
      a = functions(small)
      b = functions(large)
      (a.keys | b.keys).to_h { |k| [k, (b[k] - a[k]).to_f / units] }
    end

    def functions(file)
      fns = Hash.new(0)
      # --show=Ir: with the cache and branch models on, a line has a column per event
      IO.popen(["callgrind_annotate", "--show=Ir", "--threshold=100", "--auto=no", file], err: File::NULL).each_line do |line|
        m = line.match(/\A\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?:\s+\[(.*)\])?\s*\z/) or next
        next if m[2] == "PROGRAM TOTALS"

        fn = m[2].sub(/'\d+\z/, "").sub(/\A.*:/, "") # file:function, recursion depth
        fns[[File.basename(m[3] || "?"), fn]] += m[1].delete(",").to_i
      end
      fns
    end
  end
end

if $PROGRAM_NAME == __FILE__
  abort "usage: ruby bench/instructions.rb CONTENDER pp|ppsock|http64|http1000 [SMALL LARGE]" if ARGV.size < 2
  contender, workload, small, large = ARGV
  Bench::Instructions.new(contender, workload, small, large).main
end
