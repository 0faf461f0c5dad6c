# frozen_string_literal: true

# rake test:clients: the real-clients suite (test/clients/). Starts private
# PostgreSQL, MariaDB and Redis servers (test/clients/servers.rb: Debian's
# packages, a temporary directory, loopback ports), runs every case on
# Ruby 3.1 (the host, Debian 12's drivers) and 3.3 (the sid chroot, sid's
# drivers) on each backend the built core offers and on the Ruby loop, and
# the same cases under Async on io-event's EPoll on 3.3; prints a table
# library x loop and stops the servers, also when a run fails or is
# interrupted. A case that passes under Async and fails on farce is named.
#   CLIENTS_RUBIES="3.1"          which Rubies (default "3.1 3.3")
#   CLIENTS_BACKENDS="epoll ruby" which backends (default: each one offered)
#   CLIENTS_ASYNC=0               no Async comparison
#   CLIENTS_FILES="pg redis"      which of test/clients/*_test.rb
require "json"
require "fileutils"
require_relative "../test/clients/servers"

CLIENTS_LIBRARIES = %w[pg mysql2 redis tls http dns].freeze
# A whole run of one Ruby on one loop is killed after this many seconds
# (each case is already bounded by its own timeout, see case_helper.rb).
CLIENTS_RUN_TIMEOUT = 300

# One run: the suite's files under one Ruby and one loop; its rows are
# appended to results (a JSON-lines file under tmp/, which the chroot sees
# at the same path since it binds the repository).
# task: the rake task's name for the output; timeout: the whole run's
# limit; outer: environment for the runner itself (.ci/ruby-run, e.g. SID_BIND).
def clients_run(version, label, env, files, results, task: "test:clients", timeout: CLIENTS_RUN_TIMEOUT, outer: {})
  puts "\n-- #{task}: Ruby #{version}, #{label}"
  requires = files.map { |f| "require File.expand_path(#{f.dump})" }.join(";")
  cmd = [*ruby_runner(version), "env", *env.map { |k, v| "#{k}=#{v}" }, "FARCE_CLIENTS_RESULTS=#{results}",
         "ruby", "-W0", "-Ilib", "-Itest", "-e", requires]
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  ok = clients_spawn_bounded(cmd, timeout, task: task, env: outer)
  seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  puts format("-- Ruby %s, %s: %s in %.1f s", version, label, ok ? "passed" : "FAILED", seconds)
  [ok, seconds]
end

# Runs cmd in a process group of its own and waits for it; after timeout
# seconds, or when this process is interrupted (Ctrl-C, TERM), the whole
# group goes (the test process, its case children, the chroot's shell), so
# that nothing outlives the task. Returns whether cmd succeeded.
def clients_spawn_bounded(cmd, timeout, task: "test:clients", env: {})
  # setpriv --pdeathsig: killed outright (no rescue runs), this process takes the run with it
  pid = Process.spawn(env, "setpriv", "--pdeathsig", "KILL", "--", *cmd, chdir: ROOT, pgroup: true)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
  loop do
    _, status = Process.waitpid2(pid, Process::WNOHANG)
    return status.success? if status

    if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      warn "#{task}: no end after #{timeout} s: killed"
      Process.kill("KILL", -pid)
      Process.waitpid(pid)
      return false
    end
    sleep 0.1
  end
rescue Interrupt, SignalException
  begin
    Process.kill("KILL", -pid)
    Process.waitpid(pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end
  raise
end

# The table: one row per library, one column per Ruby and loop; each cell
# "passed/cases, seconds (the cases' wall time), worst gap in ms".
def clients_table(rows, columns, libraries = CLIENTS_LIBRARIES)
  cells = rows.group_by { |r| [r["library"], "#{r['ruby']} #{r['loop']}"] }
  width = [17, *columns.map(&:size)].max
  label = "%-#{[7, *libraries.map(&:size)].max}s"
  lines = [format(label, "") + columns.map { |c| c.rjust(width + 2) }.join]
  libraries.each do |library|
    line = format(label, library)
    columns.each do |column|
      all = cells[[library, column]] || []
      cases = all.reject { |r| r["status"] == "skip" }
      if cases.empty?
        line << (all.empty? ? "-" : "skipped").rjust(width + 2)
        next
      end
      passed = cases.count { |r| r["status"] == "pass" }
      wall = cases.sum { |r| r["wall"].to_f }
      # the cases that block on purpose show their call's length, not a fault
      gap = (cases.reject { |r| r["holds_the_loop"] }.map { |r| r["gap"].to_f }.max || 0) * 1000
      line << format("%d/%d %.1fs %.0fms", passed, cases.size, wall, gap).rjust(width + 2)
    end
    lines << line
  end
  lines
end

namespace :test do
  desc "Real clients (pg, mysql2, redis, TLS, Net::HTTP, DNS) against servers it starts: Ruby 3.1 + 3.3, every backend, vs Async"
  task clients: :compile do
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    rubies = ENV.fetch("CLIENTS_RUBIES", "3.1 3.3").split
    only = ENV["CLIENTS_FILES"].to_s.split
    files = Dir["test/clients/*_test.rb"].sort.select { |f| only.empty? || only.include?(File.basename(f, "_test.rb")) }
    abort "test:clients: no test/clients/*_test.rb matches CLIENTS_FILES=#{only.join(' ')}" if files.empty?
    if rubies.any? { |v| v != RUBY_ABI }
      Rake::Task["test:chroot"].invoke # sid's Ruby 3.3, its drivers, Async
      sh "go", "mod", "download" # the chroot builds from the host's module cache
      rubies.each { |v| sh(*ruby_runner(v), "rake", "compile") unless v == RUBY_ABI }
    end
    results = File.join("tmp", "clients", "results-#{Process.pid}.jsonl")
    FileUtils.mkdir_p(File.dirname(results))
    FileUtils.rm_f(results)
    servers = ClientsSuite::Servers.new
    runs = []
    begin
      env = servers.start
      puts "test:clients: servers up in #{servers.dir} (#{servers.timings.map { |k, v| "#{k} #{v} s" }.join(', ')})"
      rubies.each do |v|
        backends = offered_backends(v == RUBY_ABI ? [] : ruby_runner(v))
        backends &= ENV["CLIENTS_BACKENDS"].split if ENV["CLIENTS_BACKENDS"]
        backends.each do |backend|
          runs << [v, backend, *clients_run(v, "farce #{backend}", env.merge("FARCE_BACKEND" => backend), files, results)]
        end
        next unless v == "3.3" && ENV["CLIENTS_ASYNC"] != "0"

        runs << [v, "async-EPoll", *clients_run(v, "Async on io-event's EPoll",
                                                env.merge("FARCE_CLIENTS_LOOP" => "async", "IO_EVENT_SELECTOR" => "EPoll"),
                                                files, results)]
      end
    ensure
      servers.stop
    end
    rows = File.exist?(results) ? File.readlines(results).map { |l| JSON.parse(l) } : []
    columns = runs.map { |v, loop_name, *| "#{v} #{loop_name}" }
    puts "\n==== test:clients: cases passed/run, their wall time, the loop's worst gap (ticker fiber; the cases that block on purpose left out)"
    puts(*clients_table(rows, columns))
    failures = rows.select { |r| r["status"] == "fail" }
    unless failures.empty?
      puts "\nfailed:"
      failures.each { |r| puts "  Ruby #{r['ruby']} #{r['loop']}: #{r['library']} #{r['case']}: #{r['failure']}" }
    end
    # The contract: what works under Async must work on farce.
    async_passes = rows.select { |r| r["loop"].start_with?("async") && r["status"] == "pass" }.map { |r| [r["ruby"], r["library"], r["case"]] }
    worse = failures.reject { |r| r["loop"].start_with?("async") }.select { |r| async_passes.include?([r["ruby"], r["library"], r["case"]]) }
    puts "\npasses under Async, fails on farce:", *worse.map { |r| "  Ruby #{r['ruby']} #{r['loop']}: #{r['library']} #{r['case']}" } unless worse.empty?
    blocking = rows.select { |r| r["blocks"] }.map { |r| "#{r['library']}: #{r['blocks']}" }.uniq
    puts "\nblocks the loop by design (docs/clients.md): #{blocking.join('; ')}" unless blocking.empty?
    held = rows.select { |r| r["holds_the_loop"] && r["gap"] }.group_by { |r| "#{r['library']} #{r['case']}" }
    held.each do |name, cases|
      puts format("  %s: gap %.0f-%.0f ms (left out of the table's worst gap)", name, *cases.map { |r| r["gap"] * 1000 }.minmax)
    end
    total = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    puts format("\ntest:clients: %d cases, %d failed, %d runs in %.0f s (servers %.1f s)", rows.size, failures.size,
                runs.size, total, servers.timings.values.sum)
    FileUtils.rm_f(results)
    broken = runs.reject { |_, _, ok, _| ok }
    abort "test:clients: failed: #{broken.map { |v, l, *| "Ruby #{v} #{l}" }.join(', ')}" unless broken.empty?
  end
end
