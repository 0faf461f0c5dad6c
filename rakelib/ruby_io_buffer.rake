# frozen_string_literal: true

# Ruby's own test/ruby/test_io_buffer.rb on a Ruby whose IO::Buffer locks
# are counted (4.1: no IO::Buffer::LOCKED), once as Ruby runs it and once
# more for its I/O and lock cases inside farce's scheduler
# (test/ruby_io_buffer/under_farce.rb), on every backend the build offers.
# The file and the test extension it loads (-test-/io_buffer, built here
# against that Ruby, with the one internal header it includes) come from
# the same source tarball as test:ruby_fiber's tests (FARCE_RUBY_SRC);
# test:ruby_fiber runs it after the 4.1 leg's test/fiber, and
#
#   RUBIES=4.1 rake test:ruby_io_buffer
#
# alone. Where the Ruby locks with one flag, or its source lacks the file,
# it says so and runs nothing.

# Why `ruby` (a command prefix) cannot run the suite, or nil.
def ruby_io_buffer_unfit(ruby, source)
  flag = ruby_fiber_capture([*ruby, "-e", "print IO::Buffer.const_defined?(:LOCKED)"]) == "true"
  return "its IO::Buffer locks are one flag (IO::Buffer::LOCKED): the counted locks are 4.1's" if flag

  missing = ["test/ruby/test_io_buffer.rb", "ext/-test-/io_buffer/io_buffer.c", "internal/io_buffer.h"]
            .reject { |f| File.exist?(File.join(source, f)) }
  "its source (#{File.read(File.join(source, 'SOURCE')).strip}) lacks #{missing.join(', ')}" unless missing.empty?
end

# The tree run.rb takes (--suite io_buffer), next to test:ruby_fiber's
# tree of the same Ruby, and the directory holding -test-/io_buffer.so.
def ruby_io_buffer_tree(version, ruby, source)
  tree = File.join(ROOT, ruby_fiber_tree(version, source))
  suite = File.join(tree, "io_buffer")
  FileUtils.mkdir_p(suite)
  FileUtils.cp(File.join(source, "test", "ruby", "test_io_buffer.rb"), suite)
  FileUtils.cp(File.join(ROOT, "test", "ruby_io_buffer", "under_farce.rb"), File.join(suite, "test_io_buffer_under_farce.rb"))
  build = File.join(tree, "io_buffer_ext")
  FileUtils.mkdir_p(build)
  FileUtils.cp(File.join(source, "ext", "-test-", "io_buffer", "io_buffer.c"), build)
  File.write(File.join(build, "extconf.rb"), <<~RUBY)
    require "mkmf"
    $INCFLAGS << " -I#{source}" # internal/io_buffer.h
    create_makefile("-test-/io_buffer")
  RUBY
  sh(*ruby, "extconf.rb", chdir: build, out: File::NULL)
  sh("make", chdir: build, out: File::NULL)
  lib = File.join(tree, "io_buffer_lib")
  FileUtils.mkdir_p(File.join(lib, "-test-"))
  FileUtils.cp(File.join(build, "io_buffer.so"), File.join(lib, "-test-"))
  [tree, lib]
end

# Runs the suite on one Ruby of test:ruby_fiber (its command prefix and
# source directory; farce already built for it). Returns run.rb's results,
# or raises RubyFiberSkip saying why it cannot run there.
def ruby_io_buffer_leg(version, ruby, source, repeat: 1)
  why = ruby_io_buffer_unfit(ruby, source)
  raise RubyFiberSkip, "test_io_buffer.rb: Ruby #{version}: #{why}" if why

  tree, lib = ruby_io_buffer_tree(version, ruby, source)
  ruby_fiber_leg(version, ruby, source, repeat: repeat, suite: "io_buffer", tree: tree.delete_prefix("#{ROOT}/"),
                 env: { "RUBYLIB" => lib })
end

namespace :test do
  desc "Ruby's own test_io_buffer.rb (4.1, counted locks), plain and its I/O and lock cases under farce, each backend"
  task :ruby_io_buffer do
    results = []
    ENV.fetch("RUBIES", "4.1").split.each do |version|
      ruby, kind = ruby_fiber_ruby(version)
      ruby_version = ruby_fiber_capture([*ruby, "-e", "print RUBY_VERSION"])
      source = ruby_fiber_source(version, kind, ruby_version)
      kind == :host ? Rake::Task[:compile].invoke : sh(*ruby[0...-1], "rake", "compile")
      results.concat(ruby_io_buffer_leg(version, ruby, source))
    rescue RubyFiberSkip => e
      puts "test:ruby_io_buffer: SKIPPED: #{e.message}"
    end
    results.each { |r| puts "#{r['ok'] ? 'ok    ' : 'FAILED'} #{r['label']}: #{r['tests']} tests, #{r['passed']} passed" }
    abort "test:ruby_io_buffer: #{results.count { |r| !r['ok'] }} run(s) failed" unless results.all? { |r| r["ok"] }
  end
end
