# frozen_string_literal: true

# rake test:windows: farce on the Windows Ruby under wine, in the sid chroot
# of .ci/sid-setup --wine: a smoke run, farce's own minitest files (which run
# and which do not, and why, is rakelib/windows_minitest.rb), Ruby's
# test/fiber on Farce::Scheduler, the demo server under wrk, and the Windows
# gem installed and run.
require_relative "windows"
require_relative "windows_minitest"

# The tree the Windows Ruby runs from: lib/, test/, bin/, examples/ of this
# checkout with the Windows builds in lib/farce/X.Y/ (the checkout's own hold
# Linux builds for the same X.Y).
def windows_tree(abi)
  tree = File.join(ROOT, "tmp", "windows-tree")
  FileUtils.rm_rf(tree)
  FileUtils.mkdir_p(tree)
  %w[lib test bin examples].each { |d| FileUtils.cp_r(File.join(ROOT, d), tree) }
  FileUtils.rm_rf(Dir[File.join(tree, "lib", "farce", "[0-9]*.[0-9]*")])
  FileUtils.cp_r(File.join(WINDOWS_STAGE, "farce", abi), File.join(tree, "lib", "farce", abi))
  tree
end

# farce's minitest files (WINDOWS_MINITEST) under wine, shared out over
# WINDOWS_MINITEST_PROCESSES Windows Rubies run side by side, each running its
# files in one process (rakelib/windows_minitest_runner.rb). The files not
# run and the tests left out are printed with their reasons first, each
# file's counts and time after. Returns the files that did not pass.
WINDOWS_MINITEST_PROCESSES = 2
# test_reliability's soak keeps its 10,000 fibers, with a tenth of its rounds:
# all 3,000,000 operations took 199 s under wine alone, more than the rest
# of the suite together.
WINDOWS_MINITEST_ENV = { "FARCE_SOAK_ROUNDS" => "30" }.freeze

def windows_minitest(ruby_exe, tree)
  sid = ENV.fetch("SID_ROOT", "/opt/rubies/sid")
  minitest = Dir[File.join(sid, "usr/share/rubygems-integration/all/gems/minitest-*/lib")].max
  raise "test:windows: no minitest in the sid chroot" unless minitest

  all = Dir[File.join(ROOT, "test", "test_*.rb")].map { |f| File.basename(f, ".rb") }.sort - %w[test_helper]
  unlisted = all - WINDOWS_MINITEST.keys - WINDOWS_NOT_RUN.keys
  gone = WINDOWS_MINITEST.keys + WINDOWS_NOT_RUN.keys - all
  # a new file must be triaged, and a removed one leaves the lists
  raise "test:windows: #{unlisted.join(', ')}: neither run nor not run (rakelib/windows_minitest.rb)" unless unlisted.empty?
  raise "test:windows: #{gone.join(', ')}: listed in rakelib/windows_minitest.rb, not in test/" unless gone.empty?

  WINDOWS_NOT_RUN.each { |file, why| puts "test:windows: minitest #{file}: NOT RUN: #{why}" }
  WINDOWS_MINITEST.each do |file, left_out|
    left_out.each { |name, why| puts "test:windows: minitest #{file} #{name}: SKIPPED: #{why}" }
  end
  FileUtils.cp(File.join(ROOT, "rakelib", "windows_minitest_runner.rb"), tree)
  shares = WINDOWS_MINITEST.keys.each_with_index.group_by { |_, i| i % WINDOWS_MINITEST_PROCESSES }.values
  runs = shares.each_with_index.map do |share, n|
    plan = "windows_minitest_plan_#{n}.rb"
    File.write(File.join(tree, plan), "WINDOWS_MINITEST_PLAN = #{WINDOWS_MINITEST.slice(*share.map(&:first)).inspect}.freeze\n")
    Thread.new do
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      out, ok = wine_run(ruby_exe, ["-I#{minitest.delete_prefix(sid)}", "-Ilib", "-Itest", "windows_minitest_runner.rb",
                                    plan, "-v"], dir: tree, seconds: 600, env: WINDOWS_MINITEST_ENV)
      [out, ok, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
    end
  end
  report_windows_minitest(runs.map(&:value))
end

# Each file's counts and time from the runners' result lines, by the classes
# each file defined, then each process's summary; returns the files (or "the
# run N") that did not pass.
def report_windows_minitest(runs)
  file_of = {}
  results = Hash.new { |h, k| h[k] = { runs: 0, seconds: 0.0, "S" => 0, "F" => 0, "E" => 0 } }
  runs.each do |out, _, _|
    out.scan(/^windows-minitest: (\S+): (.*)$/) { |file, classes| classes.split.each { |c| file_of[c] = file } }
  end
  runs.each do |out, _, _|
    out.scan(/^windows-minitest-result: (\S+) \S+ ([\d.]+) ([.SFE])$/) do |klass, seconds, mark|
      r = results[file_of.fetch(klass, klass)]
      r[:runs] += 1
      r[:seconds] += seconds.to_f
      r[mark] += 1 if r.key?(mark)
    end
  end
  failed = []
  WINDOWS_MINITEST.each_key do |file|
    r = results.fetch(file, nil)
    unless r
      puts "test:windows: minitest #{file}: no results (killed or crashed before it ran)"
      failed << file
      next
    end
    puts format("test:windows: minitest %s: %d runs, %d failures, %d errors, %d skips (%.1f s)",
                file, r[:runs], r["F"], r["E"], r["S"], r[:seconds])
    failed << file if (r["F"] + r["E"]).positive?
  end
  runs.each_with_index do |(out, ok, took), n|
    summary = out[/^\d+ runs, .*$/] || "no summary (killed or crashed)"
    puts format("test:windows: minitest, Windows Ruby %d of %d: %s (%.0f s)", n + 1, runs.size, summary, took)
    next if ok && summary.match?(/ 0 failures, 0 errors/)

    failed << "the run #{n + 1}"
    reports = minitest_failure_reports(out)
    puts(reports.empty? ? out.lines.last(60).join : reports.map { |r| r.lines.first(40).join }.join)
  end
  failed.uniq
end

# Ruby's own test/fiber (the Windows Ruby's version) against Farce::Scheduler.
# Under wine every UNIXSocket.pair test errors (no AF_UNIX there); those are
# named and counted, anything else failing fails the leg.
def windows_ruby_fiber(ruby_exe, tree, ruby_version)
  source = ruby_fiber_source(ruby_version[/\A\d+\.\d+/], :runner, ruby_version)
  staged = File.join(ROOT, ruby_fiber_tree("windows-#{ruby_version}", source))
  dest = File.join(tree, "tmp", "ruby_fiber", ruby_version)
  FileUtils.mkdir_p(File.dirname(dest))
  FileUtils.mv(staged, dest)
  files = Dir[File.join(dest, "fiber", "test_*.rb")].map { |f| f.delete_prefix("#{dest}/") }.sort
  # Under wine the harness's descriptor leak check reads /proc/self/fd (the
  # chroot's): the wine process's Linux descriptors, which wine opens and
  # closes on its own. It would report those as leaks; it is turned off.
  File.write(File.join(dest, "no_fd_leak_check.rb"), <<~RUBY)
    require_relative "tool/lib/leakchecker"
    class LeakChecker
      def find_fds = []
    end
  RUBY
  out, = wine_run(ruby_exe, ["-I", "tool/lib", "-r", "./no_fd_leak_check.rb", "tool/test/runner.rb", "-v", *files],
                  dir: dest, seconds: 240)
  summary = out[/^\d+ tests, \d+ assertions, \d+ failures, \d+ errors, \d+ skips$/]
  unless summary
    puts out.lines.last(40).join
    return "Ruby's test/fiber: no summary (killed or crashed)"
  end
  # "  N) Error:\nClass#test_name:\nException: message"
  problems = out.scan(/^\s+\d+\) (Failure|Error):\n(\S+?)(?: \[[^\]]*\])?:\n(.*)$/)
  unix, other = problems.partition { |_, _, message| message.match?(/socketpair|EAFNOSUPPORT/) }
  unix.each { |_, name, _| puts "test:windows: ruby test/fiber #{name}: EXPECTED ERROR: #{WINDOWS_NO_UNIX_SOCKETS}" }
  other.each { |kind, name, message| puts "test:windows: ruby test/fiber #{name}: #{kind.upcase}: #{message}" }
  puts "test:windows: Ruby #{ruby_version}'s test/fiber on Farce::Scheduler (iocp) under wine: #{summary} " \
       "(#{unix.size} of them UNIXSocket.pair)"
  counted = summary.scan(/(\d+) (?:failures|errors)/).flatten.sum(&:to_i)
  return nil if other.empty? && counted == unix.size

  puts out.lines.last(60).join
  "Ruby's test/fiber: #{other.size} unexpected failures or errors"
end

# bin/demo's hello server (examples/hello_server.rb) under wine, answering
# wrk from Linux over 127.0.0.1: farce's IOCP core, then the same server on
# farce's pure-Ruby IO.select loop. Every response must be a 200.
def windows_demo(ruby_exe, tree, seconds: 5, connections: 100)
  wrk = ENV.fetch("WRK", "wrk")
  return "wrk is not installed (apt-get install wrk)" unless system("command -v #{wrk} >/dev/null")

  failures = []
  rates = {}
  %w[iocp ruby].each do |backend|
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    inner = "cd #{tree} && exec wine64 #{ruby_exe} examples/hello_server.rb #{port} #{backend}"
    server = Process.spawn(File.join(ROOT, ".ci", "sid-run"), "timeout", "-s", "KILL", "120", "env",
                           *wine_env.map { |k, v| "#{k}=#{v}" }, "sh", "-c", inner,
                           chdir: ROOT, pgroup: true, out: File::NULL, err: File.join(tree, "server-#{backend}.log"))
    begin
      up = 200.times.any? do
        TCPSocket.new("127.0.0.1", port).close
        true
      rescue SystemCallError
        sleep 0.2
        false
      end
      unless up
        failures << "the #{backend} server did not start: #{File.read(File.join(tree, "server-#{backend}.log")).lines.last(5).join}"
        next
      end
      # wrk's own 2 s time-out counts slow answers as errors; under wine on a
      # loaded machine (load average 15 on two cores) both servers had some
      out = IO.popen([wrk, "-t2", "-c#{connections}", "-d#{seconds}s", "--timeout", "10s", "http://127.0.0.1:#{port}/"],
                     err: %i[child out], &:read)
      rate = out[%r{^Requests/sec:\s+([\d.]+)}, 1]
      requests = out[/(\d+) requests in/, 1].to_i
      bad = out[/Non-2xx or 3xx responses: (\d+)/, 1].to_i
      errors = out[/Socket errors: (.*)$/, 1]
      rates[backend] = rate.to_f
      puts "test:windows: demo #{backend}: #{requests} requests in #{seconds} s, #{rate} req/s, #{bad} not 200" \
           "#{errors ? ", socket errors: #{errors}" : ''}"
      failures << "#{backend}: #{bad} responses were not 200" if bad.positive?
      failures << "#{backend}: no requests answered:\n#{out}" if requests.zero?
      # farce must answer every request (no reset, no lost connection); slow
      # answers under load are reported above, not failed on
      if backend == "iocp" && errors&.match?(/read [1-9]|write [1-9]/)
        failures << "#{backend}: socket errors #{errors}"
      end
    ensure
      begin
        Process.kill("KILL", -server)
      rescue Errno::ESRCH
        nil
      end
      Process.wait(server)
    end
  end
  if rates.size == 2 && rates["ruby"].positive?
    puts format("test:windows: demo: farce (iocp) %.0f req/s, pure-Ruby IO.select loop %.0f req/s (%.1fx), " \
                "%d connections, both under wine", rates["iocp"], rates["ruby"], rates["iocp"] / rates["ruby"], connections)
  end
  failures.empty? ? nil : "demo: #{failures.join('; ')}"
end

namespace :test do
  desc "farce on a Windows Ruby under wine: its minitest files, Ruby's test/fiber, the demo server under wrk " \
       "(FARCE_WINDOWS_RUBIES; FARCE_RUBY_SRC for test/fiber)"
  task :windows do
    ruby, why = windows_ruby
    next puts("test:windows: SKIPPED: #{why}") unless ruby

    require "socket"
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    # wine and the UCRT toolchain in the chroot (idempotent; needs the network only when missing)
    sid = ENV.fetch("SID_ROOT", "/opt/rubies/sid")
    unless %w[wine64 x86_64-w64-mingw32ucrt-gcc].all? { |t| File.executable?(File.join(sid, "usr", "bin", t)) }
      sh File.join(ROOT, ".ci", "sid-setup"), "--wine"
    end
    Rake::Task["compile:windows"].invoke
    abi = windows_ruby_abi(ruby)
    ruby_version = File.basename(ruby)[/ruby-([\d.]+)-/, 1]
    tree = windows_tree(abi)
    ruby_exe = File.join(ruby, "bin", "ruby.exe")
    problems = []
    begin
      out, ok = wine_run(ruby_exe, ["-e", "'require \"farce\"; s = Farce::Scheduler.new; p [Farce.backends, s.backend]; " \
                                          "t = Process.clock_gettime(Process::CLOCK_MONOTONIC); " \
                                          "Farce.run { 100.times { Fiber.schedule { sleep 0.1 } } }; " \
                                          "p Process.clock_gettime(Process::CLOCK_MONOTONIC) - t'", "-Ilib"].rotate(-1),
                         dir: tree, seconds: 180)
      puts "test:windows: Farce.backends, Scheduler#backend, 100 fibers sleeping 0.1 s: #{out.lines.last(2).join(' ').gsub("\n", '')}"
      problems << "the smoke run failed:\n#{out}" unless ok && out.include?(":iocp]")
      failed = windows_minitest(ruby_exe, tree)
      problems << "minitest: #{failed.join(', ')} failed" unless failed.empty?
      begin
        problem = windows_ruby_fiber(ruby_exe, tree, ruby_version)
        problems << problem if problem
      rescue RubyFiberSkip => e
        puts "test:windows: Ruby's test/fiber SKIPPED: #{e.message}"
      end
      problem = windows_demo(ruby_exe, tree)
      problems << problem if problem
      # the platform gem, installed with the Windows Ruby's gem into an empty GEM_HOME
      Rake::Task["gem:native_windows"].invoke
      Rake::Task["gem:check_windows"].invoke
    ensure
      # wine leaves its server running for a while after the last program: stop it now
      stop_wineserver
    end
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    raise "test:windows: #{problems.join("\n")}" unless problems.empty?

    puts format("test:windows: passed in %.0f s", took)
  end
end
