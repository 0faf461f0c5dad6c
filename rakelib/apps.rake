# frozen_string_literal: true

# rake test:apps: the applications suite (test/apps/). What applications
# built on the drivers of test:clients do: ActiveRecord and Sequel pools
# shared by fibers, a Sinatra app on real Falcon under load, the HTTP client
# libraries, child processes, stdio in pipelines, SQLite, thread pools
# waking fibers, Timeout around each driver. It starts the same private
# PostgreSQL, MariaDB and Redis servers as test:clients
# (test/clients/servers.rb) and runs every case on Ruby 3.3 (the sid chroot,
# sid's packages) on each backend the built core offers and on the Ruby
# loop, and under Async on io-event's EPoll as the reference; prints a table
# library x loop and stops the servers on every way out.
#
# What fails the task: a case that fails on a farce loop and passes under
# Async or on another farce loop, and a run that ended without reporting
# every case (killed, crashed). A case that fails on every loop, Async
# included, is the library's limit: listed with why (the case's `limit:`),
# not counted.
#   APPS_RUBIES="3.3"          which Rubies (default "3.3")
#   APPS_BACKENDS="epoll ruby" which backends (default: each one offered)
#   APPS_ASYNC=0               no Async reference
#   APPS_FILES="sqlite stdio"  which of test/apps/*_test.rb
#   FARCE_PEER_SUITES=DIR      where Falcon comes from (not in Debian); without it the Falcon case skips
require "json"
require "fileutils"
require_relative "../test/clients/servers"

APPS_LIBRARIES = %w[activerecord sequel falcon http process stdio sqlite concurrent timeout].freeze
# A whole run of one Ruby on one loop is killed after this many seconds
# (each case is already bounded by its own timeout, see case_helper.rb).
APPS_RUN_TIMEOUT = 240

# The environment that gives the Falcon case its Falcon (falcon_test.rb),
# and the runner's (SID_BIND: the folder appears in the chroot at its own
# path): [case env, runner env], or two empty ones without FARCE_PEER_SUITES.
def apps_falcon_env
  dir = ENV["FARCE_PEER_SUITES"].to_s
  return [{}, {}] if dir.empty?

  dir = File.realpath(dir)
  folder = ->(name) { Dir[File.join(dir, "#{name}-[0-9]*")].select { |d| File.directory?(d) }.max }
  parts = %w[falcon async-utilization async-http-cache].to_h { |name| [name, folder.call(name)] }
  missing = parts.select { |_, d| d.nil? }.keys
  abort "test:apps: FARCE_PEER_SUITES=#{dir} has no #{missing.join(', ')} folder" unless missing.empty?
  [{ "FARCE_APPS_FALCON" => File.join(parts["falcon"], "bin", "falcon"),
     "FARCE_APPS_FALCON_RUBYLIB" => parts.values.map { |d| File.join(d, "lib") }.join(":") },
   { "SID_BIND" => [ENV["SID_BIND"], dir].compact.reject(&:empty?).join(":") }]
end

# Sorts the failed rows: [limits, farce_only]. A case is the library's limit
# when it failed on every loop of its Ruby that ran it (Async included when
# it ran): limits maps [ruby, library, case] to its failed rows. Every other
# failure on a farce loop is farce's (farce_only, rows).
def apps_verdicts(rows)
  key = ->(r) { [r["ruby"], r["library"], r["case"]] }
  by_case = rows.group_by(&key)
  failures = rows.select { |r| r["status"] == "fail" }
  limits, others = failures.partition { |r| by_case[key.call(r)].all? { |other| other["status"] == "fail" } }
  [limits.group_by(&key), others.reject { |r| r["loop"].start_with?("async") }]
end

namespace :test do
  desc "Applications: ORMs, Sinatra on Falcon, HTTP clients, processes, stdio, SQLite, thread pools, Timeout; Ruby 3.3, every backend, vs Async"
  task apps: :compile do
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    rubies = ENV.fetch("APPS_RUBIES", "3.3").split
    only = ENV["APPS_FILES"].to_s.split
    files = Dir["test/apps/*_test.rb"].sort.select { |f| only.empty? || only.include?(File.basename(f, "_test.rb")) }
    abort "test:apps: no test/apps/*_test.rb matches APPS_FILES=#{only.join(' ')}" if files.empty?
    if rubies.any? { |v| v != RUBY_ABI }
      Rake::Task["test:chroot"].invoke # sid's Ruby 3.3, the frameworks, Async
      sh "go", "mod", "download" # the chroot builds from the host's module cache
      rubies.each { |v| sh(*ruby_runner(v), "rake", "compile") unless v == RUBY_ABI }
    end
    falcon_env, outer = apps_falcon_env
    puts "test:apps: no FARCE_PEER_SUITES: the Falcon case skips (Falcon is not in Debian)" if falcon_env.empty?
    results = File.join("tmp", "apps", "results-#{Process.pid}.jsonl")
    FileUtils.mkdir_p(File.dirname(results))
    FileUtils.rm_f(results)
    servers = ClientsSuite::Servers.new
    runs = []
    begin
      env = servers.start.merge(falcon_env)
      puts "test:apps: servers up in #{servers.dir} (#{servers.timings.map { |k, v| "#{k} #{v} s" }.join(', ')})"
      run = lambda do |v, label, column, run_env|
        ok, seconds = clients_run(v, label, run_env, files, results, task: "test:apps", timeout: APPS_RUN_TIMEOUT, outer: outer)
        runs << [v, column, ok, seconds]
      end
      rubies.each do |v|
        backends = offered_backends(v == RUBY_ABI ? [] : ruby_runner(v))
        backends &= ENV["APPS_BACKENDS"].split if ENV["APPS_BACKENDS"]
        backends.each { |backend| run.call(v, "farce #{backend}", backend, env.merge("FARCE_BACKEND" => backend)) }
        next if ENV["APPS_ASYNC"] == "0"

        run.call(v, "Async on io-event's EPoll", "async-EPoll",
                 env.merge("FARCE_CLIENTS_LOOP" => "async", "IO_EVENT_SELECTOR" => "EPoll"))
      end
    ensure
      servers.stop
    end
    rows = File.exist?(results) ? File.readlines(results).map { |l| JSON.parse(l) } : []
    FileUtils.rm_f(results)
    columns = runs.map { |v, column, *| "#{v} #{column}" }
    puts "\n==== test:apps: cases passed/run, their wall time, the loop's worst gap (ticker fiber; the cases that block on purpose left out)"
    puts(*clients_table(rows, columns, APPS_LIBRARIES))

    limits, farce_only = apps_verdicts(rows)
    unless limits.empty?
      puts "\nthe libraries' own limits (failed on every loop, Async included):"
      limits.each do |(ruby, library, name), cases|
        puts "  Ruby #{ruby} #{library}: #{name}", "    why: #{cases.first['limit'] || '(not known: no limit recorded)'}",
             "    #{cases.first['failure']}"
      end
    end
    # a run that ended before reporting every case: killed or crashed
    expected = rows.map { |r| [r["ruby"], r["library"], r["case"]] }.uniq
    broken = runs.filter_map do |v, column, _ok, _|
      got = rows.select { |r| r["ruby"] == v && r["loop"] == column }.map { |r| [r["ruby"], r["library"], r["case"]] }
      missing = expected.select { |ruby, *| ruby == v } - got
      "Ruby #{v} #{column}: #{got.empty? ? 'no case reported' : "#{missing.size} cases not reported"}" unless missing.empty? && !got.empty?
    end
    skipped = rows.select { |r| r["status"] == "skip" }
    puts "\nskipped: #{skipped.map { |r| "#{r['library']}: #{r['case']}" }.uniq.join('; ')}" unless skipped.empty?
    blocking = rows.select { |r| r["blocks"] }.map { |r| "#{r['library']}: #{r['blocks']}" }.uniq
    puts "\nblocks the loop by design (docs/apps.md): #{blocking.join('; ')}" unless blocking.empty?
    rows.select { |r| r["holds_the_loop"] && r["gap"] }.group_by { |r| "#{r['library']} #{r['case']}" }.each do |name, cases|
      puts format("  %s: gap %.0f-%.0f ms (left out of the table's worst gap)", name, *cases.map { |r| r["gap"] * 1000 }.minmax)
    end
    unless farce_only.empty?
      puts "\nFAILED ON FARCE (passes under Async or on another farce loop):"
      farce_only.each { |r| puts "  Ruby #{r['ruby']} #{r['loop']}: #{r['library']} #{r['case']}: #{r['failure']}" }
    end
    total = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    passed = rows.count { |r| r["status"] == "pass" }
    puts format("\ntest:apps: %d cases: %d passed, %d failed on farce, %d the libraries' limits (%d cases), %d skipped; " \
                "%d runs in %.0f s (servers %.1f s)", rows.size, passed, farce_only.size, limits.values.sum(&:size), limits.size,
                skipped.size, runs.size, total, servers.timings.values.sum)
    problems = farce_only.map { |r| "#{r['loop']}: #{r['library']} #{r['case']}" } + broken
    abort "test:apps: failed: #{problems.join('; ')}" unless problems.empty?
  end
end
