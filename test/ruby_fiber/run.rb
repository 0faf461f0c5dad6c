# frozen_string_literal: true

# Runs Ruby's own test/fiber suite against farce, on the Ruby running this
# script and the backend FARCE_BACKEND names (rakelib/ruby_fiber.rake
# prepares the tree and calls it once per Ruby and backend).
#
#   ruby test/ruby_fiber/run.rb TREE [--label TEXT] [--timeout SECONDS] [--seed N] [--suite DIR]
#
# TREE holds Ruby's test harness from the same source (tool/lib, and
# tool/test/runner.rb) and fiber/: that Ruby's test/fiber files, whose
# scheduler.rb loads test/ruby_fiber/scheduler.rb (the adapter) instead of
# the reference scheduler. --suite names another directory of TREE to run
# the same way (io_buffer: rakelib/ruby_io_buffer.rake).
#
# The harness runs every file in one process, as `make test-all
# TESTS=fiber` does, in the harness's random order (the seed is printed and
# kept for reruns; --seed or RUBY_FIBER_SEED repeats an order). A test that
# runs longer than --timeout seconds (default 60, RUBY_FIBER_TEST_TIMEOUT)
# is a hang: the process group is killed, the test counts as failed under
# its name, and the suite runs again without it and without the tests
# already done (record.rb prints each result as the harness records it).
# A process that dies in a test (a crash) is handled the same way. No test
# runs twice.
#
# Ends with one line, `ruby_fiber: LABEL: N tests, ...`, and a line
# `ruby_fiber-result: {JSON}` for the rake task. Exit status 0 only when no
# test failed, raised, hung or crashed.
require "io/wait"
require "json"
require "rbconfig"

# Tests left out, each with why. Only tests of the reference scheduler's own
# internals may be here, never a test of the Fiber::Scheduler contract.
# Keys: "Class#test"; values: [Ruby versions (Regexp on RUBY_VERSION), reason].
EXCLUDED = {}.freeze

tree = nil
label = nil
timeout = Float(ENV.fetch("RUBY_FIBER_TEST_TIMEOUT", "60"))
seed = ENV["RUBY_FIBER_SEED"]&.then { |s| Integer(s) }
suite = "fiber"
args = ARGV.dup
until args.empty?
  case (arg = args.shift)
  when "--label" then label = args.shift
  when "--timeout" then timeout = Float(args.shift)
  when "--seed" then seed = Integer(args.shift)
  when "--suite" then suite = args.shift
  when /\A-/ then abort "run.rb: unknown option #{arg}"
  else tree = arg
  end
end
abort "usage: ruby #{$0} TREE [--label TEXT] [--timeout SECONDS] [--seed N] [--suite DIR]" unless tree && File.directory?(tree)
tree = File.expand_path(tree)
backend = ENV.fetch("FARCE_BACKEND", "auto")
label ||= "Ruby #{RUBY_VERSION}#{'dev' if RUBY_PATCHLEVEL == -1} #{backend}"
seed ||= Random.new_seed % 65_536
$stdout.sync = true

files = Dir[File.join(tree, suite, "test_*.rb")].sort
abort "run.rb: no test files in #{tree}/#{suite}" if files.empty?
runner = File.join(tree, "tool", "test", "runner.rb")
abort "run.rb: no #{runner} (Ruby's test harness)" unless File.file?(runner)

excluded = EXCLUDED.select { |_, (versions, _)| versions.match?(RUBY_VERSION) }
excluded.each { |name, (_, reason)| puts "ruby_fiber: #{label}: EXCLUDED #{name}: #{reason}" }

RECORD = File.join(__dir__, "record.rb") # prints each result as the harness records it
SEPARATOR = "\x1e"
# The worst of several records of one test (the harness records a test again
# when its teardown fails).
RANK = %w[pass skip failure error].freeze

# One run of the harness over every file, without the tests named in
# `skip`; each test's result goes into `results` as it is recorded.
# Returns [:finished, harness summary counts, exit status],
# [:stuck, test, reason] when a test hung or the process died in one, or
# [:broken, nil, reason].
def run_suite(runner, tree, files, skip, seed, timeout, results)
  filters = skip.empty? ? [] : ["-n", "!/#{skip.map { |n| "\\A#{Regexp.escape(n)}\\z" }.join('|')}/"]
  cmd = [RbConfig.ruby, "-I", File.join(tree, "tool", "lib"), "-r", RECORD, runner, "-v", "--seed=#{seed}",
         *filters, *files]
  reader, writer = IO.pipe
  pid = Process.spawn(*cmd, in: File::NULL, out: writer, err: writer, pgroup: true, chdir: tree)
  writer.close
  out = +""     # what the harness printed, records taken out
  pending = +"" # printed but not shown yet (a record may be cut between reads)
  current = nil # the test running now: the harness prints "[i/N] Class#test" before running it
  deadline = Time.now + timeout
  loop do
    left = deadline - Time.now
    if left <= 0 || !reader.wait_readable(left)
      Process.kill(:KILL, -pid)
      Process.wait(pid)
      pid = nil
      reader.close
      what = current || "(before the first test)"
      puts "\nruby_fiber: #{what} ran #{timeout.round}s without finishing: killed (hang)"
      return [:stuck, current, "hang: killed after #{timeout.round}s"]
    end
    begin
      pending << reader.readpartial(65_536)
    rescue EOFError
      break
    end
    while (i = pending.index(SEPARATOR))
      j = pending.index(SEPARATOR, i + 1) or break
      name, status = pending[(i + 1)...j].split
      results[name] = [results[name], status].compact.max_by { |s| RANK.index(s) }
      shown = pending[0...i]
      pending = pending[(j + 1)..]
      print shown
      out << shown
    end
    unless pending.include?(SEPARATOR)
      print pending
      out << pending
      pending = +""
    end
    started = out.scan(/^\[\s*\d+\/\d+\]\s+(\S+#\S+)/).last
    if started && started[0] != current
      current = started[0]
      deadline = Time.now + timeout
    end
  end
  print pending
  reader.close
  Process.wait(pid)
  pid = nil
  status = $?
  totals = out[/^(\d+) tests, (\d+) assertions, (\d+) failures, (\d+) errors, (\d+) skips/]
  unless totals
    return [:stuck, current, "crashed: the process ended (#{status}) in this test"] if current

    return [:broken, nil, "the harness ended (#{status}) before any test ran"]
  end
  [:finished, totals.scan(/\d+/).map(&:to_i), status]
ensure
  # this script failing (or interrupted) leaves no test processes behind
  if pid
    begin
      Process.kill(:KILL, -pid)
      Process.wait(pid)
    rescue SystemCallError
      nil
    end
  end
end

# Runs the harness until it gets through: after a hang or a crash, again
# without that test and without those already recorded, so that no test
# runs twice and each keeps the result of its one run.
results = {}
stuck = {}
problems = []
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
loop do
  before = results.size
  outcome, *rest = run_suite(runner, tree, files, excluded.keys + stuck.keys + results.keys, seed, timeout, results)
  case outcome
  when :finished
    totals, status = rest
    if !status.success? && results.values.none? { |s| %w[failure error].include?(s) }
      problems << "the harness exited unsuccessfully (#{status}) though no test failed"
    end
    # the harness's own count of its last run must match the results recorded in it
    recorded = results.size - before
    problems << "the harness counted #{totals[0]} tests, #{recorded} were recorded" unless totals[0] == recorded
    break
  when :stuck
    name, reason = rest
    abort "run.rb: #{label}: #{reason} (no test name known)" unless name
    abort "run.rb: #{label}: #{name} stuck twice" if stuck.key?(name)
    results.delete(name) # a teardown record of the test that then hung
    stuck[name] = reason
    abort "run.rb: #{label}: more than 10 tests hung or crashed: #{stuck.keys.join(', ')}" if stuck.size > 10
  else
    abort "run.rb: #{label}: #{rest[1]}"
  end
end
seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started

by_status = results.group_by { |_, status| status }.transform_values { |pairs| pairs.map(&:first).sort }
count = ->(status) { by_status.fetch(status, []).size }
failed = by_status.fetch("failure", []) + by_status.fetch("error", [])
tests = results.size + stuck.size
# A file that fails to load, or a class the adapter lacks, would make the
# harness run fewer tests without a failure: every test method the files
# define must have run (or be excluded).
defined = files.sum { |f| File.read(f).scan(/^\s*def (test_\w+)/).size }
if defined > tests + excluded.size
  problems << "the files define #{defined} tests, #{tests + excluded.size} ran or were excluded"
end
line = +"#{tests} tests, #{count['pass']} passed, #{count['failure']} failures, #{count['error']} errors, " \
        "#{count['skip']} skips, #{stuck.size} hung/crashed"
line << ", #{excluded.size} excluded" unless excluded.empty?
line << " (#{seconds.round(1)}s, seed #{seed})"
puts
stuck.each { |name, reason| puts "ruby_fiber: #{label}: FAILED #{name}: #{reason}" }
failed.each { |name| puts "ruby_fiber: #{label}: FAILED #{name} (#{results[name]})" }
problems.each { |problem| puts "ruby_fiber: #{label}: FAILED: #{problem}" }
puts "ruby_fiber: #{label}: #{line}"
summary = { label: label, ruby: RUBY_VERSION, backend: backend, tests: tests, passed: count["pass"],
            failures: count["failure"], errors: count["error"], skips: count["skip"],
            hung: stuck, failed: failed, problems: problems, excluded: excluded.transform_values(&:last),
            defined: defined, seconds: seconds.round(1), seed: seed }
puts "ruby_fiber-result: #{JSON.generate(summary)}"
exit(failed.empty? && stuck.empty? && problems.empty? ? 0 : 1)
