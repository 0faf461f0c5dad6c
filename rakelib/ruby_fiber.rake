# frozen_string_literal: true

# Ruby's own test/fiber suite against farce: `rake test:ruby_fiber`.
#
# For each Ruby (RUBIES, default "3.1 3.2 3.3 3.4 4.0 4.1") it takes that
# Ruby's test/fiber and test harness from its own source, builds farce for
# it, and runs the suite (test/ruby_fiber/run.rb, with the adapter
# test/ruby_fiber/scheduler.rb standing in for the reference scheduler)
# once per backend the built core offers, plus `ruby` (the pure-Ruby loop).
#
#   3.1            the host's Ruby; source: Debian's ruby3.1 (apt-get source)
#   3.3, 3.4       the sid chroot (.ci/sid-run); source: Debian's ruby3.3/ruby3.4
#   3.2, 4.0, 4.1  $FARCE_RUBIES_PREFIX/X.Y/bin/ruby (default /opt/rubies);
#                  source: a ruby-X.Y.Z*.tar.* in $FARCE_RUBY_SRC (.ci/run sets it)
# Each is reached and built through test:rubies' ruby_runner
# (rakelib/rubies.rb, .ci/ruby-run).
#
# A Ruby that is not there, or whose source is not, is skipped with the
# reason printed (RUBY_FIBER_STRICT=1 or FARCE_RUBIES_REQUIRED=1 makes that
# a failure: CI sets them).
#
#   rake test:ruby_fiber                           # every Ruby present
#   RUBIES="3.3 3.4" rake test:ruby_fiber
#   RUBY=/opt/rubies/4.0/bin/ruby rake test:ruby_fiber   # one Ruby, by path
#   BACKENDS="epoll ruby" ...                      # instead of every backend
#   RUBY_FIBER_BUSY=2 RUBY_FIBER_REPEAT=10 ...     # on a loaded machine (two CPU hogs), ten times over
#   RUBY_FIBER_TEST_TIMEOUT=60                     # seconds before a test counts as hung
#
# On a Ruby with counted IO::Buffer locks (4.1) each leg also runs Ruby's
# test/ruby/test_io_buffer.rb, plain and under farce (rakelib/ruby_io_buffer.rake).
#
# Other tasks may call ruby_fiber_leg(version, ruby_command, source_dir).

require "digest"
require "json"
require_relative "rubies"

RUBY_FIBER_RUBIES = %w[3.1 3.2 3.3 3.4 4.0 4.1].freeze
# Prints a Ruby's version as its labels show it: 4.1.0dev for a snapshot.
RUBY_FIBER_VERSION = 'print RUBY_VERSION, (RUBY_PATCHLEVEL == -1 ? "dev" : "")'
# Fetched sources are kept here (FARCE_CACHE, else /var/cache/farce when
# writable, else tmp/cache in the checkout).
def ruby_fiber_cache
  base = ENV["FARCE_CACHE"] || begin
    FileUtils.mkdir_p("/var/cache/farce")
    File.writable?("/var/cache/farce") ? "/var/cache/farce" : File.join(ROOT, "tmp", "cache")
  rescue SystemCallError
    File.join(ROOT, "tmp", "cache")
  end
  File.join(base, "ruby-fiber")
end

# Why a Ruby's leg cannot run (printed, then skipped or failed).
class RubyFiberSkip < StandardError; end

# The command prefix that runs `version`'s ruby (run from ROOT), and what
# it is: :host, :sid (Debian's Rubies), :runner (built through ruby_runner,
# whose prefix also runs rake) or :path (RUBY=).
def ruby_fiber_ruby(version)
  return [[ENV["RUBY"]], :path] if ENV["RUBY"]
  return [[RbConfig.ruby], :host] if version == RUBY_ABI

  sid = %w[3.3 3.4].include?(version)
  if sid
    sid_root = ENV.fetch("SID_ROOT", "/opt/rubies/sid")
    unless File.executable?(File.join(sid_root, "usr", "bin", "ruby#{version}"))
      raise RubyFiberSkip, "no Ruby #{version} in #{sid_root} (.ci/sid-setup makes it)"
    end
  end
  why = ruby_unavailable(version) # test:rubies' one way to each Ruby (rakelib/rubies.rb)
  raise RubyFiberSkip, why if why

  [[*ruby_runner(version), "ruby"], sid ? :sid : :runner]
end

def ruby_fiber_capture(cmd)
  out = IO.popen(cmd, chdir: ROOT, err: %i[child out], &:read)
  raise "#{cmd.join(' ')} failed: #{out}" unless $?.success?

  out
end

# The directory (in the cache) holding this Ruby's test/fiber, tool/lib and
# tool/test: from Debian's source package for a Debian Ruby, else from the
# release tarball in FARCE_RUBY_SRC.
def ruby_fiber_source(version, kind, ruby_version)
  case kind
  when :host, :sid
    pkg = "ruby#{version}"
    root = kind == :sid ? ENV.fetch("SID_ROOT", "/opt/rubies/sid") : "/"
    script = File.join(ROOT, "test", "ruby_fiber", "debian-source")
    out = IO.popen(["env", "FARCE_CACHE=#{File.dirname(ruby_fiber_cache)}", script, pkg, root], err: %i[child out], &:read)
    dir = out.lines.last&.strip
    raise RubyFiberSkip, "Debian's source of #{pkg} could not be fetched:\n#{out}" unless $?.success? && dir && File.directory?(dir)

    $stdout.print(out.lines[0...-1].join)
    dir
  else
    src = ENV["FARCE_RUBY_SRC"]
    raise RubyFiberSkip, "no Ruby source for #{ruby_version}: set FARCE_RUBY_SRC to a directory holding ruby-#{ruby_version}*.tar.xz" unless src && File.directory?(src)

    tarball = Dir[File.join(src, "ruby-*.tar.*")].sort.find do |f|
      File.basename(f).match?(/\Aruby-#{Regexp.escape(ruby_version)}(?![0-9])/)
    end
    raise RubyFiberSkip, "no ruby-#{ruby_version}*.tar.* in #{src}" unless tarball

    dir = File.join(ruby_fiber_cache, File.basename(tarball).sub(/\.tar\..*\z/, ""))
    # a tarball replaced under the same name (a newer snapshot) is taken again
    sum = Digest::SHA256.file(tarball).hexdigest
    complete = File.join(dir, ".complete")
    unless File.exist?(complete) && File.read(complete).strip == sum
      FileUtils.rm_rf(dir)
      FileUtils.mkdir_p(dir)
      sh "tar", "-xf", tarball, "-C", dir, "--strip-components=1", "--wildcards",
         "*/test/fiber/*", "*/tool/lib/*", "*/tool/test/*.rb"
      # IO::Buffer's own tests and the test extension they load (with the one
      # internal header it includes), where the tarball has them (test:ruby_io_buffer)
      system("tar", "-xf", tarball, "-C", dir, "--strip-components=1", "--wildcards",
             "*/test/ruby/test_io_buffer.rb", "*/ext/-test-/io_buffer/*", "*/internal/io_buffer.h", err: File::NULL)
      File.write(File.join(dir, "SOURCE"), "#{File.basename(tarball)} (FARCE_RUBY_SRC)\n")
      File.write(complete, "#{sum}\n")
    end
    dir
  end
end

# tmp/ruby_fiber/VERSION: the harness, and the tests with a scheduler.rb
# that loads the adapter. Inside the repository, so that the sid chroot
# (which sees only the current directory) reaches it at the same relative path.
def ruby_fiber_tree(version, source)
  tree = File.join("tmp", "ruby_fiber", version)
  full = File.join(ROOT, tree)
  FileUtils.rm_rf(full)
  FileUtils.mkdir_p([File.join(full, "fiber"), File.join(full, "tool", "test")])
  FileUtils.cp_r(File.join(source, "tool", "lib"), File.join(full, "tool"))
  Dir[File.join(source, "tool", "test", "{runner,init}.rb")].each { |f| FileUtils.cp(f, File.join(full, "tool", "test")) }
  Dir[File.join(source, "test", "fiber", "*.rb")].each do |f|
    FileUtils.cp(f, File.join(full, "fiber")) unless File.basename(f) == "scheduler.rb"
  end
  File.write(File.join(full, "fiber", "scheduler.rb"), <<~RUBY)
    # frozen_string_literal: true
    # Not Ruby's reference scheduler: farce, through the adapter (rakelib/ruby_fiber.rake).
    require_relative "../../../../test/ruby_fiber/scheduler"
  RUBY
  tree
end

# Builds farce for a Ruby that runs no rake of its own (Debian's rake needs
# ostruct, which Ruby 4.0 no longer ships by default): the same steps as
# `rake compile`, with that Ruby's mkmf.
def ruby_fiber_compile(ruby)
  abi = ruby_fiber_capture([*ruby, "-e", "print RUBY_VERSION[/\\A\\d+\\.\\d+/]"])
  build = File.join(ROOT, "tmp", "build-#{abi}")
  FileUtils.mkdir_p(build)
  sh(*ruby, File.join(ROOT, "ext", "farce", "extconf.rb"), chdir: build)
  FileUtils.rm_f(File.join(build, "farce_ext.so"))
  sh("make", "-j2", chdir: build)
  target = File.join(ROOT, "lib", "farce", abi)
  FileUtils.mkdir_p(target)
  %w[farce_ext.so libfarce_core.so].each { |f| FileUtils.cp(File.join(build, f), target) }
end

# The backends the core built for that Ruby offers, and :ruby.
def ruby_fiber_backends(ruby)
  probe = "names = Farce.backends - [:auto] + [:ruby]; " \
          "puts names.select { |n| Farce::Scheduler.new(backend: n).close; true rescue false }"
  ruby_fiber_capture([*ruby, "-Ilib", "-rfarce", "-e", probe]).split
end

# Runs the suite on one Ruby (given by its command prefix, run from ROOT),
# once per backend. Returns one result hash per backend (see run.rb).
def ruby_fiber_leg(version, ruby, source, backends: nil, repeat: 1, suite: "fiber", tree: nil, env: {})
  ruby_version = ruby_fiber_capture([*ruby, "-e", RUBY_FIBER_VERSION])
  tree ||= ruby_fiber_tree(version, source)
  backends ||= ENV["BACKENDS"]&.split || ruby_fiber_backends(ruby)
  puts "ruby_fiber: Ruby #{ruby_version}: tests from #{File.read(File.join(source, 'SOURCE')).strip}; backends #{backends.join(', ')}"
  results = []
  repeat.times do |round|
    backends.each do |backend|
      label = "Ruby #{ruby_version} #{"#{suite} " unless suite == 'fiber'}#{backend}#{" round #{round + 1}/#{repeat}" if repeat > 1}"
      puts "\n---- ruby_fiber: #{label}"
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      # run.rb kills a hung test itself; this bounds everything else.
      cmd = ["timeout", "-s", "KILL", ENV.fetch("RUBY_FIBER_LEG_TIMEOUT", "1800"), "env", "FARCE_BACKEND=#{backend}",
             *env.map { |k, v| "#{k}=#{v}" }, *ruby, File.join("test", "ruby_fiber", "run.rb"), tree,
             "--label", label, "--suite", suite]
      result = nil
      IO.popen(cmd, chdir: ROOT, err: %i[child out]) do |io|
        io.each_line do |line|
          if line.start_with?("ruby_fiber-result: ")
            result = JSON.parse(line.delete_prefix("ruby_fiber-result: "))
          else
            $stdout.print(line)
          end
        end
      end
      seconds = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started).round(1)
      result ||= { "label" => label, "tests" => 0, "passed" => 0, "failed" => [], "hung" => {},
                   "broken" => "run.rb ended (#{$?}) without a result" }
      result["ok"] = $?.success? && !result["broken"]
      result["wall"] = seconds
      results << result
    end
  end
  results
end

# CPU hogs for the loaded-machine mode (test:ruby_fiber's RUBY_FIBER_BUSY,
# test:rubies' RUBIES_BUSY): busy sibling processes, each a Ruby spinning at
# normal priority, stopped (by pid) when the block ends.
def with_busy_siblings(count)
  return yield if count.zero?

  pids = Array.new(count) { Process.spawn(RbConfig.ruby, "-e", "loop {}") }
  puts "#{count} busy sibling process(es) running (pids #{pids.join(' ')})"
  begin
    yield
  ensure
    pids.each do |pid|
      Process.kill(:KILL, pid)
      Process.wait(pid)
    end
  end
end

namespace :test do
  desc "Ruby's own test/fiber against farce, each Ruby (RUBIES) x each backend + the Ruby loop"
  task :ruby_fiber do
    rubies = ENV["RUBY"] ? ["(RUBY)"] : ENV.fetch("RUBIES", RUBY_FIBER_RUBIES.join(" ")).split
    strict = ENV["RUBY_FIBER_STRICT"] == "1" || ENV["FARCE_RUBIES_REQUIRED"] == "1"
    repeat = Integer(ENV.fetch("RUBY_FIBER_REPEAT", "1"))
    busy = Integer(ENV.fetch("RUBY_FIBER_BUSY", "0"))
    results = []
    skipped = {}
    durations = {}
    go_modules = false
    with_busy_siblings(busy) do
      rubies.each do |version|
        puts "\n==== ruby_fiber: Ruby #{version}"
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        begin
          ruby, kind = ruby_fiber_ruby(version)
          ruby_version = ruby_fiber_capture([*ruby, "-e", "print RUBY_VERSION"])
          version = ruby_version[/\A\d+\.\d+/] if version == "(RUBY)"
          source = ruby_fiber_source(version, kind, ruby_version)
          case kind
          when :host then Rake::Task[:compile].invoke
          when :sid, :runner # the prefix that runs this Ruby's `ruby` runs its `rake` too
            unless go_modules
              sh "go", "mod", "download" # the chroot builds from the host's module cache
              go_modules = true
            end
            sh(*ruby[0...-1], "rake", "compile")
          else ruby_fiber_compile(ruby)
          end
          results.concat(ruby_fiber_leg(version, ruby, source, repeat: repeat))
          begin # Ruby's test_io_buffer.rb where locks are counted (rakelib/ruby_io_buffer.rake)
            results.concat(ruby_io_buffer_leg(version, ruby, source, repeat: repeat))
          rescue RubyFiberSkip => e
            puts "ruby_fiber: not run: #{e.message}"
          end
        rescue RubyFiberSkip => e
          skipped[version] = e.message
          puts "ruby_fiber: Ruby #{version}: SKIPPED: #{e.message}"
        end
        durations[version] = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started).round
        puts "ruby_fiber: Ruby #{version}: #{durations[version]}s"
      end
    end

    puts "\n==== ruby_fiber: summary#{" (#{busy} busy sibling processes)" if busy.positive?}"
    results.each do |r|
      state = r["ok"] ? "ok    " : "FAILED"
      detail = r["broken"] || "#{r['tests']} tests, #{r['passed']} passed, #{r['failures']} failures, " \
                              "#{r['errors']} errors, #{r['skips']} skips, #{r['hung'].size} hung"
      puts format("%s %-28s %s (%.1fs)", state, r["label"], detail, r["wall"])
      r["hung"].each { |name, why| puts "         hung:   #{name} (#{why})" }
      r["failed"].each { |name| puts "         failed: #{name}" }
      r["problems"]&.each { |problem| puts "         #{problem}" }
      r["excluded"]&.each { |name, why| puts "         excluded: #{name} (#{why})" }
    end
    if repeat > 1 # per Ruby and backend: how many rounds were clean, and what failed how often
      results.group_by { |r| r["label"].sub(/ round .*/, "") }.each do |label, runs|
        tally = runs.flat_map { |r| r["failed"] + r["hung"].keys + Array(r["problems"]) + Array(r["broken"]) }.tally
        puts format("%-26s %d of %d rounds passed%s", label, runs.count { |r| r["ok"] }, runs.size,
                    tally.empty? ? "" : "; #{tally.map { |name, n| "#{name} x#{n}" }.join(', ')}")
      end
    end
    skipped.each { |version, why| puts "SKIPPED Ruby #{version}: #{why.lines.first.strip}" }
    puts "time per Ruby (build, source, every run): #{durations.map { |v, t| "#{v} #{t}s" }.join(', ')}"
    bad = results.reject { |r| r["ok"] }
    abort "test:ruby_fiber: #{bad.size} run(s) failed" unless bad.empty?
    abort "test:ruby_fiber: Ruby #{skipped.keys.join(', ')} skipped (RUBY_FIBER_STRICT=1 or FARCE_RUBIES_REQUIRED=1)" if strict && !skipped.empty?
    abort "test:ruby_fiber: nothing ran" if results.empty?
    puts "test:ruby_fiber: all passed"
  end
end
