# frozen_string_literal: true

# The tests. `rake test` is what a contributor runs; bin/test and .ci/run add
# the Go, cross-compilation, other-Ruby and wine suites by name.
require "rake/testtask"
require_relative "rubies"

$stdout.sync = true # our progress lines and the suites' output, in order

SID_RUN = File.join(ROOT, ".ci", "sid-run")
SID_SETUP = File.join(ROOT, ".ci", "sid-setup")
# A run that hangs is killed after this many seconds (per suite, per Ruby).
SUITE_TIMEOUT = Integer(ENV.fetch("TEST_TIMEOUT", "900"))

# The backends this kernel offers, as the built core reports them: each
# named backend is tried in a child process (starting Go there, not here).
# runner: a command prefix (ruby_runner) to ask another Ruby's build.
def offered_backends(runner = [])
  probe = <<~RUBY
    names = Farce.backends - [:auto] + [:ruby] # :ruby, the pure-Ruby loop, runs everywhere
    puts names.select { |name|
      begin
        Farce::Scheduler.new(backend: name).close
        true
      rescue Farce::Error
        false
      end
    }
  RUBY
  ruby = runner.empty? ? RbConfig.ruby : "ruby"
  out = IO.popen([*runner, ruby, "-Ilib", "-rfarce", "-e", probe], chdir: ROOT, &:read)
  raise "could not ask the built core for its backends" unless $?.success?

  out.split
end

# The reports of the failures and errors in a minitest run's output. minitest
# lists skips and failures alike at the end; with dozens of skips there, the
# failures' own reports are what a log must show.
def minitest_failure_reports(out)
  out.split(/^(?=\s*\d+\) (?:Failure|Error|Skipped):$)/).grep(/\A\s*\d+\) (?:Failure|Error):$/)
end

# Runs a minitest command, echoing its output; with require_no_skips, fails
# when any test skipped (a suite whose gems are missing skips every test).
def run_minitest(cmd, label, require_no_skips: false)
  out = +""
  IO.popen(["timeout", "-s", "KILL", SUITE_TIMEOUT.to_s, *cmd], err: %i[child out]) do |io|
    io.each_line { |line| $stdout.print(line); out << line }
  end
  totals = out.lines.grep(/\A\d+ runs, /).last
  unless $?.success? && totals
    # the summary is often all a CI log keeps: it names what failed, each
    # with the first lines of its report, not only how many
    briefs = minitest_failure_reports(out).map { |r| r.lines.drop(1).first(4).map(&:strip).join(" | ") }
    raise "#{label}: failed (exit #{$?.exitstatus}, #{totals&.strip || 'no totals'})" +
          briefs.map { |b| "\n    #{b}" }.join
  end
  raise "#{label}: tests skipped, expected none: #{totals.strip}" if require_no_skips && !totals.include?(" 0 skips")

  puts "#{label}: #{totals.strip}"
  skipped = out.scan(/^\s*\d+\) Skipped:\n(.+?):\n(.+?)\n/)
  ["#{label}: #{totals.strip}", *skipped.map { |test, why| "  skip #{test}: #{why}" }.uniq]
end

MINITEST_FILES = "Dir['test/**/test_*.rb'].sort.each { |f| require File.expand_path(f) }"

Rake::TestTask.new(:minitest) do |t|
  t.description = "minitest suite (test/) on the current Ruby and backend (FARCE_BACKEND)"
  t.libs << "lib" << "test"
  t.test_files = FileList["test/**/test_*.rb"]
  t.warning = false
end

desc "RSpec contract specs (spec/) on the current Ruby"
task :spec do
  sh RbConfig.ruby, "-Ilib", "-S", "rspec", "--format", "progress", *Dir["spec/**/*_spec.rb"]
end

desc "Build, then minitest once per backend this kernel offers, then RSpec (current Ruby)"
task test: :compile do
  backends = offered_backends
  puts "rake test: Ruby #{RUBY_VERSION}, backends #{backends.join(', ')}"
  backends.each do |backend|
    puts "\n-- minitest, FARCE_BACKEND=#{backend}"
    run_minitest(["env", "FARCE_BACKEND=#{backend}", RbConfig.ruby, "-Ilib", "-Itest", "-e", MINITEST_FILES],
                 "Ruby #{RUBY_VERSION} #{backend}")
  end
  puts "\n-- rspec"
  Rake::Task[:spec].invoke
end

namespace :test do
  desc "Go: vet, the race detector, fuzzing bounded by execution count (FARCE_FUZZTIME overrides)"
  task :go do
    sh "go", "vet", "./..."
    sh "go", "test", "-race", "-count=1", "./..."
    # Each target runs for a number of executions, about 15 s of this
    # machine's quiet rate: a duration bound races Go's fuzz coordinator
    # (up to 1.26, the deadline that ends a -fuzztime run can surface from
    # a worker still finishing its input as a failed target, "context
    # deadline exceeded", with no crasher), which starved CI workers hit.
    # A count has no deadline to race; a loaded machine only takes longer.
    # Go also minimizes every input that finds new coverage before it goes
    # on, for up to a minute by default; a second is plenty for these.
    { "FuzzStateMachine" => ["./internal/sched/", "60000x"], "FuzzReserved" => ["./internal/sched/", "50000x"],
      "FuzzTimerHeap" => ["./internal/sched/", "250000x"], "FuzzOpTable" => ["./internal/driver/", "150000x"] }
      .each do |target, (pkg, executions)|
      fuzztime = ENV.fetch("FARCE_FUZZTIME", executions)
      sh "go", "test", "-run", "^$", "-fuzz", "^#{target}$", "-fuzztime", fuzztime, "-fuzzminimizetime", "1s", pkg
    end
  end

  desc "Vet and test-compile the Go packages for every GOOS a driver claims"
  task :cross do
    sh "bash", File.join(ROOT, ".ci", "cross-compile.sh")
  end

  desc "Make sure the Debian sid chroot with Ruby 3.3/3.4 exists (SID_ROOT, default /opt/rubies/sid)"
  task :chroot do
    sh SID_SETUP
  end

  # On one Ruby of the matrix: build; minitest on the backends RUBY_LEG_BACKENDS
  # names and on the Ruby loop; Async on farce's io-event selector where
  # Debian's Async and io-event load; RSpec. Returns what ran, for the summary.
  # Every suite of the leg runs even when one fails; the failures are
  # raised together at the end, after what passed was recorded in `results`.
  def test_one_ruby(version, results)
    runner = ruby_runner(version)
    sh(*runner, "rake", "compile")
    main = Dir["test/test_*.rb"].sort.map { |f| "require File.expand_path(#{f.dump})" }.join(";")
    failures = []
    suite = lambda do |&run|
      run.call
    rescue StandardError => e
      failures << e.message
      results << "FAILED: #{e.message}"
    end
    # RUBIES_BUSY="3.3": that leg's test/ suites run with both CPU cores
    # busy (two CPU-bound sibling processes, as RUBY_FIBER_BUSY does for
    # Ruby's test/fiber), so that a test only a loaded machine breaks is
    # caught in every bin/test, not on a busy CI machine later
    busy = ENV.fetch("RUBIES_BUSY", "").split.include?(version) ? 2 : 0
    with_busy_siblings(busy) do
      leg_backends(version, runner).each do |backend|
        label = "Ruby #{version} test/ on #{backend == 'ruby' ? 'the Ruby loop' : backend}#{busy.positive? ? ', both cores busy' : ''}"
        # the pure-Ruby loop keeps the same expectations on every Ruby
        # -v: minitest names each skipped test and its reason (for the summary)
        suite.call do
          results.concat(run_minitest([*runner, "env", "FARCE_BACKEND=#{backend}", "ruby", "-Ilib", "-Itest", "-e", main, "--", "-v"],
                                      label))
        end
      end
    end
    if (missing = async_missing(runner))
      puts "Ruby #{version}: skipping test/io_event: #{missing}"
      results << "test/io_event skipped: #{missing}"
    else
      io_event = Dir["test/io_event/test_*.rb"].sort.map { |f| "require File.expand_path(#{f.dump})" }.join(";")
      # On 3.3 io-event's native selectors are there to compare with: no skip
      # is allowed. Elsewhere the comparisons with them skip, saying so.
      suite.call do
        results.concat(run_minitest([*runner, "ruby", "-Ilib", "-Itest", "-e", io_event, "--", "-v"],
                                    "Ruby #{version} test/io_event (Async on farce's selector)",
                                    require_no_skips: version == "3.3"))
      end
    end
    suite.call do
      sh(*runner, "ruby", "-Ilib", "-S", "rspec", "--format", "progress", *Dir["spec/**/*_spec.rb"])
      results << "RSpec passed"
    end
    raise LegFailed, failures.join("; ") unless failures.empty?
  end

  desc "Build and test on Ruby #{RUBY_LEGS.join(', ')}; RUBIES='4.0 4.1' picks, RUBIES_BACKENDS=all runs every backend on each, " \
       "RUBIES_BUSY='3.3' runs that leg's test/ with both cores busy"
  task :rubies do
    rubies = ENV.fetch("RUBIES", RUBY_LEGS.join(" ")).split
    if rubies.any? { |v| v != RUBY_ABI }
      Rake::Task["test:chroot"].invoke # 3.3/3.4, and the test gems of the built Rubies
      sh "go", "mod", "download" # the chroot builds from the host's module cache (GOPROXY=off there)
    end
    summary = {}
    failed = []
    rubies.each do |v|
      puts "\n==== Ruby #{v}"
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      # A Ruby .ci/ruby-build cannot install here (no prebuilt, no source,
      # offline) is skipped, saying why; with FARCE_RUBIES_REQUIRED=1 (CI)
      # that is a failure.
      if (why = ruby_unavailable(v))
        raise why if ENV["FARCE_RUBIES_REQUIRED"] == "1"

        puts "Ruby #{v}: skipped: #{why}"
        summary[v] = ["skipped: #{why}"]
        next
      end
      summary[v] = []
      test_one_ruby(v, summary[v])
    rescue StandardError => e
      warn "Ruby #{v}: #{e.message}"
      summary[v] ||= []
      summary[v] << "FAILED: #{e.message}" unless e.is_a?(LegFailed) # (its suites' failures are listed)
      failed << v
    ensure
      summary[v] << format("%.1f min", (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) / 60) if started
    end
    puts "\n==== test:rubies summary"
    summary.each { |v, lines| puts "Ruby #{v}:", *summarize_skips(lines).map { |l| "  #{l}" } }
    # The host's build for its own Ruby was replaced by none of these (one
    # directory per ABI), so nothing needs rebuilding afterwards.
    abort "test:rubies: failed on Ruby #{failed.join(', ')}" unless failed.empty?
    puts "test:rubies: #{rubies.join(', ')} done"
  end

  desc "The Windows (IOCP) driver tests under wine from Debian sid"
  task :wine do
    sh "bash", File.join(ROOT, ".ci", "wine-tests.sh")
  end

  desc "Check the RBS signatures in sig/ (rbs parse + validate, with the chroot's Ruby 3.3)"
  task :sig do
    rbs = system("rbs", "--version", out: File::NULL, err: File::NULL) ? [] : ["env", "SID_RUBY=3.3", SID_RUN]
    sh(*rbs, "rbs", "parse", *Dir["sig/**/*.rbs"])
    sh(*rbs, "rbs", "-I", "sig", "validate")
  end
end
