# frozen_string_literal: true

# Runs Ruby's own test/fiber suite against farce, on the Ruby running this
# script and the backend FARCE_BACKEND names (rakelib/ruby_fiber.rake
# prepares the tree and calls it once per Ruby and backend).
#
#   ruby test/ruby_fiber/run.rb TREE [--label TEXT] [--timeout SECONDS] [--seed N]
#
# TREE holds Ruby's test harness from the same source (tool/lib, and
# tool/test/runner.rb) and fiber/: that Ruby's test/fiber files, whose
# scheduler.rb loads test/ruby_fiber/scheduler.rb (the adapter) instead of
# the reference scheduler.
#
# The harness runs every file in one process, as `make test-all
# TESTS=fiber` does, in the harness's random order (the seed is printed and
# kept for reruns; --seed or RUBY_FIBER_SEED repeats an order). A test that
# runs longer than --timeout seconds (default 60, RUBY_FIBER_TEST_TIMEOUT)
# is a hang: the process group is killed, the test counts as failed under
# its name, and the suite runs again without it. A process that dies in a
# test (a crash) is handled the same way. Tests are never retried.
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
args = ARGV.dup
until args.empty?
  case (arg = args.shift)
  when "--label" then label = args.shift
  when "--timeout" then timeout = Float(args.shift)
  when "--seed" then seed = Integer(args.shift)
  when /\A-/ then abort "run.rb: unknown option #{arg}"
  else tree = arg
  end
end
abort "usage: ruby #{$0} TREE [--label TEXT] [--timeout SECONDS] [--seed N]" unless tree && File.directory?(tree)
tree = File.expand_path(tree)
backend = ENV.fetch("FARCE_BACKEND", "auto")
label ||= "Ruby #{RUBY_VERSION}#{'dev' if RUBY_PATCHLEVEL == -1} #{backend}"
seed ||= Random.new_seed % 65_536
$stdout.sync = true

files = Dir[File.join(tree, "fiber", "test_*.rb")].sort
abort "run.rb: no test files in #{tree}/fiber" if files.empty?
runner = File.join(tree, "tool", "test", "runner.rb")
abort "run.rb: no #{runner} (Ruby's test harness)" unless File.file?(runner)

excluded = EXCLUDED.select { |_, (versions, _)| versions.match?(RUBY_VERSION) }
excluded.each { |name, (_, reason)| puts "ruby_fiber: #{label}: EXCLUDED #{name}: #{reason}" }

# One run of the harness over every file, without the tests named in
# `skip`. Returns [:finished, counts, failed names] or [:stuck, test,
# reason] when a test hung or the process died in one.
def run_suite(runner, tree, files, skip, seed, timeout)
  filters = skip.empty? ? [] : ["-n", "!/#{skip.map { |n| "\\A#{Regexp.escape(n)}\\z" }.join('|')}/"]
  cmd = [RbConfig.ruby, "-I", File.join(tree, "tool", "lib"), runner, "-v", "--seed=#{seed}", *filters, *files]
  reader, writer = IO.pipe
  pid = Process.spawn(*cmd, in: File::NULL, out: writer, err: writer, pgroup: true, chdir: tree)
  writer.close
  out = +""
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
    chunk = begin
      reader.readpartial(65_536)
    rescue EOFError
      break
    end
    print chunk
    out << chunk
    started = out.scan(/^\[\s*\d+\/\d+\]\s+(\S+#\S+)/).last
    if started && started[0] != current
      current = started[0]
      deadline = Time.now + timeout
    end
  end
  reader.close
  Process.wait(pid)
  pid = nil
  status = $?
  totals = out[/^(\d+) tests, (\d+) assertions, (\d+) failures, (\d+) errors, (\d+) skips/]
  unless totals
    return [:stuck, current, "crashed: the process ended (#{status}) in this test"] if current

    return [:broken, nil, "the harness ended (#{status}) before any test ran"]
  end
  counts = totals.scan(/\d+/).map(&:to_i)
  failed = out.scan(/^\s+\d+\) (?:Failure|Error):\n(\S+#[^\s:]+)/).flatten.uniq
  [:finished, { tests: counts[0], assertions: counts[1], failures: counts[2], errors: counts[3], skips: counts[4] },
   failed, status.success?]
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

stuck = {}
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
result = nil
loop do
  outcome, *rest = run_suite(runner, tree, files, excluded.keys + stuck.keys, seed, timeout)
  case outcome
  when :finished
    result = rest
    break
  when :stuck
    name, reason = rest
    abort "run.rb: #{label}: #{reason} (no test name known)" unless name
    abort "run.rb: #{label}: #{name} stuck twice" if stuck.key?(name)
    stuck[name] = reason
    abort "run.rb: #{label}: more than 10 tests hung or crashed: #{stuck.keys.join(', ')}" if stuck.size > 10
  else
    abort "run.rb: #{label}: #{rest[1]}"
  end
end
seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started

counts, failed, harness_ok = result
tests = counts[:tests] + stuck.size
bad = counts[:failures] + counts[:errors] + stuck.size
# A file that fails to load, or a class the adapter lacks, would make the
# harness run fewer tests without a failure: every test method the files
# define must have run (or be excluded).
defined = files.sum { |f| File.read(f).scan(/^\s*def (test_\w+)/).size }
missing = defined - tests - excluded.size
passed = tests - bad - counts[:skips]
line = +"#{tests} tests, #{passed} passed, #{counts[:failures]} failures, #{counts[:errors]} errors, " \
        "#{counts[:skips]} skips, #{stuck.size} hung/crashed"
line << ", #{excluded.size} excluded" unless excluded.empty?
line << " (#{seconds.round(1)}s, seed #{seed})"
puts
stuck.each { |name, reason| puts "ruby_fiber: #{label}: FAILED #{name}: #{reason}" }
failed.each { |name| puts "ruby_fiber: #{label}: FAILED #{name}" }
puts "ruby_fiber: #{label}: FAILED: the harness exited unsuccessfully after its summary" if bad.zero? && !harness_ok
puts "ruby_fiber: #{label}: FAILED: the files define #{defined} tests, #{tests + excluded.size} ran or were excluded" if missing.positive?
puts "ruby_fiber: #{label}: #{line}"
summary = { label: label, ruby: RUBY_VERSION, backend: backend, tests: tests, passed: passed,
            failures: counts[:failures], errors: counts[:errors], skips: counts[:skips],
            hung: stuck, failed: failed, excluded: excluded.transform_values(&:last), defined: defined,
            seconds: seconds.round(1), seed: seed }
puts "ruby_fiber-result: #{JSON.generate(summary)}"
exit(bad.zero? && harness_ok && !missing.positive? ? 0 : 1)
