# frozen_string_literal: true

# Runs the whole benchmark suite and regenerates bench/README.md, bench/plot.svg
# and bench/results/*.json. Started by `rake bench` or `bin/bench`. This file is the
# entry point (settings, main, --render); the runner's parts are in bench/runner/, one
# purpose each: tools.rb, contenders.rb, cases.rb, running.rb, rows.rb, summary.rb,
# report.rb, scaling.rb, scaling_plot.rb, backends.rb, production_targets.rb, falcon_section.rb,
# connection_targets.rb, scale_out_section.rb and readme_template.rb.
#
# Environment:
#   BENCH_RUNS=N         alternating runs per figure; the median is reported (default 3; quick 1)
#   BENCH_QUICK=1        short version (~2 minutes): shorter runs, fewer timers/fibers
#   BENCH_CONTENDERS=a,b override the contenders. A contender is NAME[+VAR=VALUE...][@RUBY]:
#                        NAME is farce-BACKEND, farce-ruby, async, async-epoll or threads; @RUBY picks the Ruby
#                        (3.3 and 3.4 run in the sid chroot; default: the host's, async: 3.3);
#                        +VAR=VALUE sets an environment variable (farce-epoll+GOMAXPROCS=2@3.3;
#                        farce-epoll+FARCE_STALL_MS=100@3.3 = with stall detection on;
#                        farce-epoll+BENCH_FARCE_LIB=DIR/lib@3.3 = another checkout's farce, built,
#                        under the repository: two trees in one run, bench/lib/harness.rb).
#                        Async on Ruby X is the reference of every contender on Ruby X.
#   BENCH_REFERENCES=0   skip the reference rows (C epoll ping-pong, Ruby floor)
#   BENCH_EXTRA=1        also poll, GOMAXPROCS=1 and threads (on the headline Ruby)
#   BENCH_RUBIES=v=path  more Rubies by path (comma-separated; default 4.0=/opt/rubies/4.0/bin/ruby when
#                        it exists): farce on each (with YJIT too where it has YJIT), its Ruby floor,
#                        threads, and Async on farce's selector when Debian's pure-Ruby Async loads there
#   BENCH_YJIT=0         no YJIT rows (default: YJIT twins of farce-epoll, farce-io_uring and the Ruby floor on
#                        every Ruby whose `ruby --yjit` has YJIT)
#   BENCH_ONLY=x,y       only these cases (ids in the table: pp1, ppsock1, pp100, http16, http64, http256, http1000,
#                        http4000, http10000, scale0, scale10k, timers, spawnburst, acceptburst, files, queue, xthread,
#                        memfiber, memio); `scaling` = the scaling rows (the HTTP cases and scale0, scale10k) on the
#                        scaling contenders only (`rake bench:scaling`; bench/runner/scaling.rb)
#   BENCH_FILE_MIB=N     MiB per file of the file-reads case (64 files; default 16, quick 2)
#   BENCH_SID_RUN=path   chroot runner (default .ci/sid-run; .ci/sid-setup makes the chroot)
#   BENCH_NO_README=1    keep bench/README.md and bench/plot.svg (write only bench/results/)
#   BENCH_PIN=0          do not pin the HTTP server to CPU 0 and wrk to CPU 1 (taskset; the default where
#                        there are 2+ CPUs)
#   FARCE_PEER_SUITES    the peers' folder: io-event's source there is built for 4.0 and 3.4
#                        (.ci/io-event-build, cached) so that Async runs on its native EPoll (async-epoll@X)
require "json"
require "rbconfig"
require "fileutils"
require "time"
require "etc"
require_relative "lib/wrk_output"
require_relative "lib/tcp_census"
require_relative "lib/steady_window"
require_relative "lib/descriptor_limit"

module Bench
  class Runner
    ROOT = File.expand_path("..", __dir__)
    BENCH = File.join(ROOT, "bench")
    RESULTS = File.join(BENCH, "results")
    RUBY_ABI = RUBY_VERSION[/\A\d+\.\d+/]
    SID_RUBIES = %w[3.3 3.4].freeze
    # Cases that also run the reference programs (the kernel's limit, the Ruby floor).
    REFERENCE_CASES = %w[pp1 ppsock1 pp100].freeze
    # Turns YJIT on in a contender (+RUBY_YJIT_ENABLE=1): every Ruby with YJIT reads it.
    YJIT = "RUBY_YJIT_ENABLE=1"
    DEFAULT_RUBIES = { "4.0" => "/opt/rubies/4.0/bin/ruby" }.freeze
    C_PINGPONG = File.join(RESULTS, "pingpong_epoll")

    # only: :scaling for a case that runs on the scaling contenders alone (bench/runner/scaling.rb)
    Case = Struct.new(:id, :title, :kind, :args, :expect_s, :only, keyword_init: true)
    # section: :scaling for a row shown in the scaling table instead of the main one
    Row = Struct.new(:id, :label, :unit, :better, :plot, :value, :section, keyword_init: true)

    def initialize
      @quick = ENV["BENCH_QUICK"] == "1"
      @runs = Integer(ENV["BENCH_RUNS"] || (@quick ? 1 : 3))
      raise ArgumentError, "BENCH_RUNS must be >= 1" if @runs < 1

      @sid_run = ENV["BENCH_SID_RUN"] || File.join(ROOT, ".ci", "sid-run")
      @tty = $stderr.tty?
      @started = now
      @notes = []
      @load = []
      @restore = []
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # Re-renders README.md and plot.svg from a saved results JSON (no benchmarking).
    def render(path)
      data = JSON.parse(File.read(path))
      @quick = data["quick"]
      @runs = data["runs"]
      @notes = data["notes"] || []
      @raw = data["raw"]
      @load = data["load"] || []
      contenders = data["contenders"].keys
      references = (data["references"] || {}).keys
      summary = summarize(contenders)
      plotted = write_plot(contenders, summary)
      write_scaling_plot(contenders, summary)
      print_table(contenders, summary)
      print_scaling(contenders, summary)
      File.write(File.join(BENCH, "README.md"),
                 readme(contenders, references, summary, data["machine"], plotted, data["generated_at"]))
      warn "bench: re-rendered bench/README.md from #{path}"
    end

    # A run narrowed by BENCH_ONLY or BENCH_CONTENDERS says so in its notes, so that a README
    # without some rows is not read as a full run.
    def note_subset(kases)
      if ENV["BENCH_ONLY"]
        left = @cases_left_out || []
        @notes << "BENCH_ONLY: this run measured #{kases.map(&:id).join(', ')}; not #{left.join(', ')} " \
                  "(their rows, and the notes on them above, are in the last full run: git log -p bench/README.md)"
      end
      @notes << "BENCH_CONTENDERS: the contenders were chosen by hand for this run" if ENV["BENCH_CONTENDERS"]
    end

    def main
      if ARGV[0] == "--render"
        return render(ARGV[1] || File.join(RESULTS, "latest.json"))
      end

      ensure_tools
      ensure_built
      contenders = discover_contenders
      contenders = scaling_contenders(contenders) if scaling_only?
      kases = cases
      ensure_descriptors(kases)
      note_subset(kases)
      references = kases.any? { |k| REFERENCE_CASES.include?(k.id) } ? discover_references(contenders) : []
      warn "bench: contenders #{contenders.join(', ')}; references #{references.join(', ')}; " \
           "#{kases.size} workloads × #{@runs} run(s)#{@quick ? ' (quick)' : ''}"
      info = machine
      run_all(contenders, kases, references)
      summary = summarize(contenders)
      write_outputs(contenders, references, summary, info)
    ensure
      @restore.each(&:call)
    end
  end
end

%w[tools contenders cases running rows summary report scaling scaling_plot backends production_targets falcon_section
   connection_targets scale_out_section readme_template].each do |part|
  require_relative "runner/#{part}"
end

Bench::Runner.new.main if $PROGRAM_NAME == __FILE__
