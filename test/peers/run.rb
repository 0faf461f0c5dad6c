# frozen_string_literal: true

# The peers' own suites against farce (rake test:peers runs this with Ruby 3.3,
# in the sid chroot when the host's Ruby is another):
#
#   FARCE_PEER_SUITES=DIR ruby test/peers/run.rb [io-event] [async] [falcon] [serving]
#
# DIR holds io-event-*/, async-*/, falcon-*/, async-utilization-*/ and
# async-http-cache-*/ (the suites as published, with sus's coverage plugin
# left out); they are test data and stay outside this repository.
#
# Each suite runs under io-event's EPoll selector and under Farce
# (IO_EVENT_SELECTOR=Farce with farce's selector loaded), each test reported
# by sus_report.rb, and the two runs are compared test by test. A test that
# passes under EPoll and does not under Farce (fails, errors, hangs, never
# runs because the run died) fails this check. Tests failing under both are
# listed: the suites are older than the installed Async and io-event, and
# Debian's openssl lacks a few methods Falcon's tests use.
#
# A test still running after FARCE_PEER_TEST_LIMIT seconds (default 15) gets
# an exception raised into it (SIGUSR2, see sus_report.rb) and the suite goes
# on; if it is still there 20 s later, the run is killed and the test named as
# hung. Each run also has a whole-run limit (SUITE_LIMITS, or
# FARCE_PEER_SUITE_LIMIT seconds for all). Output and reports stay in
# FARCE_PEER_LOGS (default tmp/peers/).
require "rbconfig"
require "fileutils"
require_relative "results"

module PeerSuites
  ROOT = File.expand_path("../..", __dir__)
  REPORTER = File.join(__dir__, "sus_report.rb")
  FARCE_OPT = "-I#{File.join(ROOT, 'lib')} -rfarce/io_event"
  TEST_LIMIT = Float(ENV.fetch("FARCE_PEER_TEST_LIMIT", "15"))
  # Whole-run limits, each several times what a run takes under EPoll on
  # 2 busy cores (io-event 3 s, Async 7 s, Falcon 110 to 135 s).
  SUITE_LIMITS = { "io-event" => 120, "async" => 300, "falcon" => 500 }.freeze
  KILL_GRACE = 20
  # Async's suite without test/net (it needs the internet) and test/traces
  # (the traces backend's own tests), as the suites' README runs it.
  ASYNC_FILES = %w[test/async test/kernel test/io.rb test/thread.rb test/thread test/process.rb test/fiber.rb
                   test/enumerator.rb test/kernel.rb test/io test/file.rb test/tempfile.rb].freeze

  module_function

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def folder(base, name)
    dirs = Dir[File.join(base, "#{name}-[0-9]*")].select { |d| File.directory?(d) }.sort
    abort "test:peers: no #{name}-VERSION folder in #{base}" if dirs.empty?
    dirs.last
  end

  # Runs `sus ARGS` in DIR with ENV, watching the per-test report; returns a
  # PeerResults::Run.
  def run_sus(label, dir, args, env, logs, limit)
    limit = Float(ENV.fetch("FARCE_PEER_SUITE_LIMIT", limit))
    slug = label.downcase.gsub(/[^a-z0-9]+/, "-")
    report = File.join(logs, "#{slug}.report")
    log = File.join(logs, "#{slug}.log")
    File.write(report, "")
    sus = begin
      Gem.bin_path("sus", "sus")
    rescue Gem::GemNotFoundException
      abort "test:peers: sus is not installed for Ruby #{RUBY_VERSION} (.ci/sid-setup installs it in the sid chroot)"
    end
    started = now
    pid = Process.spawn({ "FARCE_SUS_REPORT" => report }.merge(env),
                        RbConfig.ruby, "-r", REPORTER, sus, *args,
                        chdir: dir, in: File::NULL, out: log, err: %i[child out], pgroup: true)
    note = nil
    current = nil
    since = nil
    interrupted = nil
    seen = 0
    status = nil
    loop do
      _, status = Process.wait2(pid, Process::WNOHANG)
      break if status

      text = File.read(report)
      text[seen..].each_line do |line|
        break unless line.end_with?("\n")

        seen += line.bytesize
        kind, key = line.split("\t", 3)
        if kind == "start"
          current = key
          since = now
          interrupted = nil
        elsif kind == "end"
          current = nil
        end
      end
      t = now
      if t - started > limit
        note = "killed: the whole run took over #{limit.to_i} s#{" (in #{current})" if current}"
      elsif current && interrupted.nil? && t - since > TEST_LIMIT
        Process.kill(:USR2, pid)
        interrupted = t
      elsif current && interrupted && t - interrupted > KILL_GRACE
        note = "killed: #{current} still running #{KILL_GRACE} s after being interrupted at #{TEST_LIMIT.to_i} s"
      end
      if note
        kill_group(pid)
        _, status = Process.wait2(pid)
        break
      end
      sleep 0.2
    end
    kill_group(pid) # whatever the suite started and left behind
    output = File.read(log)
    tests = PeerResults.parse(File.read(report))
    summary = PeerResults.summary_line(output)
    note ||= "stopped without sus's summary (exit #{status.exitstatus || status.termsig && "signal #{status.termsig}"})" unless summary
    PeerResults::Run.new(label, tests, summary, status, note, now - started)
  end

  def kill_group(pid)
    Process.kill(:KILL, -pid)
  rescue Errno::ESRCH, Errno::EPERM
    nil
  end

  Outcome = Struct.new(:name, :farce, :epoll, :comparison, :seconds, :problems, :farce_counts, :epoll_counts)

  def report(outcome)
    c = outcome.comparison
    puts "\n== #{outcome.name}: #{outcome.seconds.round} s"
    [outcome.epoll, outcome.farce].uniq.each do |run|
      puts "  #{run.label} (#{run.seconds.round} s): #{run.summary || run.note}"
    end
    puts "  tests under EPoll: #{outcome.epoll_counts}; under Farce: #{outcome.farce_counts}"
    list = lambda do |title, items|
      next if items.empty?

      puts "  #{title} (#{items.size}):"
      items.each { |item| puts "    - #{(item.is_a?(Array) ? item.first || item.last : item).describe}" }
    end
    list.call("FARCE-ONLY FAILURES (pass under EPoll)", c.farce_only)
    list.call("fail under both selectors (version skew or environment, not counted against farce)", c.both)
    list.call("pass under Farce only", c.epoll_only)
    list.call("skipped under one selector only", c.skip_differs.map { |f, e| f || e })
    outcome.problems.each { |p| puts "  PROBLEM: #{p}" }
  end

  # Both runs compared; problems that fail the check besides Farce-only
  # failures: a baseline that did not complete, or a report with no tests.
  def outcome(name, farce_run, epoll_run, farce_tests, epoll_tests, seconds)
    problems = []
    problems << "the EPoll baseline did not complete (#{epoll_run.note}): nothing to compare against" unless epoll_run.completed?
    problems << "the Farce run did not complete: #{farce_run.note}" unless farce_run.completed?
    problems << "no test reported under EPoll (is sus_report.rb loaded?)" if epoll_tests.empty?
    comparison = PeerResults.compare(farce_tests, epoll_tests)
    Outcome.new(name, farce_run, epoll_run, comparison, seconds, problems,
                PeerResults.counts(farce_tests), PeerResults.counts(epoll_tests))
  end

  def io_event(base, logs)
    dir = folder(base, "io-event")
    started = now
    run = run_sus("io-event #{File.basename(dir)} (EPoll and Farce in one run)", dir, ["test/io/event/selector.rb"],
                  { "RUBYOPT" => FARCE_OPT }, logs, SUITE_LIMITS["io-event"])
    # The suite's shared examples run once per selector class it finds
    # (EPoll, Select, URing when built, Farce, and io-event's Debug wrapper).
    farce, epoll = PeerResults.split(run.tests, farce: "Farce", epoll: "EPoll", others: %w[Select URing KQueue IOCP])
    outcome("io-event's selector suite", run, run, farce, epoll, now - started)
  end

  def two_runs(name, dir, args, logs, limit, env: {})
    started = now
    # the baseline without farce loaded at all
    epoll = run_sus("#{name} under EPoll", dir, args, env.merge("IO_EVENT_SELECTOR" => "EPoll", "RUBYOPT" => nil), logs, limit)
    farce = run_sus("#{name} under Farce", dir, args, env.merge("IO_EVENT_SELECTOR" => "Farce", "RUBYOPT" => FARCE_OPT),
                    logs, limit)
    outcome("#{name}'s suite", farce, epoll, farce.tests, epoll.tests, now - started)
  end

  def async(base, logs)
    dir = folder(base, "async")
    two_runs("Async #{File.basename(dir)}", dir, ASYNC_FILES, logs, SUITE_LIMITS["async"])
  end

  # Falcon and the two gems it needs that Debian lacks, on the load path of
  # the suite and of the servers it starts (`rackup --server falcon`).
  def falcon_rubylib(base)
    [folder(base, "falcon"), folder(base, "async-utilization"), folder(base, "async-http-cache")]
      .map { |d| File.join(d, "lib") }.join(":")
  end

  def falcon(base, logs)
    dir = folder(base, "falcon")
    two_runs("Falcon #{File.basename(dir)}", dir, [], logs, SUITE_LIMITS["falcon"], env: { "RUBYLIB" => falcon_rubylib(base) })
  end

  # The Falcon serving check (falcon_serving.rb), under EPoll, then Farce.
  def serving(base, logs)
    require_relative "falcon_serving"
    dir = folder(base, "falcon")
    started = now
    check = FalconServing.new(dir, falcon_rubylib(base), logs)
    runs = { "EPoll" => { "IO_EVENT_SELECTOR" => "EPoll", "RUBYOPT" => nil },
             "Farce" => { "IO_EVENT_SELECTOR" => "Farce", "RUBYOPT" => FARCE_OPT } }.to_h do |selector, env|
      puts "-- falcon serve (#{File.basename(dir)}) under #{selector}"
      run_started = now
      tests = check.run(selector, env)
      summary = PeerResults.counts(tests)
      [selector, PeerResults::Run.new("falcon serve under #{selector}", tests, summary, nil, nil, now - run_started)]
    end
    outcome("Falcon serving check", runs["Farce"], runs["EPoll"], runs["Farce"].tests, runs["EPoll"].tests, now - started)
  end

  def main(argv)
    base = ENV["FARCE_PEER_SUITES"].to_s
    if base.empty?
      puts "test:peers: SKIPPED: FARCE_PEER_SUITES is not set. It names the folder holding the peers' own suites " \
           "(io-event's, Async's, Falcon's), which are test data kept outside this repository; CI (.ci/run) sets it."
      return 0
    end
    abort "test:peers: FARCE_PEER_SUITES=#{base} is not a folder" unless File.directory?(base)
    logs = File.expand_path(ENV.fetch("FARCE_PEER_LOGS", File.join(ROOT, "tmp", "peers")))
    FileUtils.mkdir_p(logs)
    parts = argv.empty? ? %w[io-event async falcon serving] : argv
    require "io/event"
    require "async/version"
    puts "test:peers: Ruby #{RUBY_VERSION}, io-event #{IO::Event::VERSION}, Async #{Async::VERSION}, " \
         "suites from #{base}; logs in #{logs}"
    failed = []
    parts.each do |part|
      case part
      when "io-event", "async", "falcon"
        o = send(part.tr("-", "_"), base, logs)
        report(o)
        failed << o.name unless o.comparison.ok? && o.problems.empty?
      when "serving"
        o = serving(base, logs)
        report(o)
        failed << o.name unless o.comparison.ok? && o.problems.empty?
      else
        abort "test:peers: unknown part #{part} (io-event, async, falcon, serving)"
      end
    end
    if failed.empty?
      puts "\ntest:peers: passed (#{parts.join(', ')})"
      0
    else
      puts "\ntest:peers: FAILED: #{failed.join('; ')}"
      1
    end
  end
end

exit PeerSuites.main(ARGV) if $PROGRAM_NAME == __FILE__
