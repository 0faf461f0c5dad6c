# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"
require "tmpdir"

# The pure-Ruby loop (lib/farce/ruby_loop.rb): chosen by backend: :ruby,
# and the fallback when the native core is missing or refused. The rest of
# the suite runs on it with FARCE_BACKEND=ruby; this file checks the choice.
class TestRubyLoop < Minitest::Test
  def test_backend_ruby_is_a_farce_scheduler_with_the_native_stats_keys
    s = Farce::Scheduler.new(backend: :ruby)
    assert_kind_of Farce::Scheduler, s
    assert_equal :ruby, s.backend
    assert_match(/asked for the Ruby loop/, s.fallback_reason)
    native = Farce::Scheduler.new(backend: :poll)
    assert_equal native.stats.keys.sort, s.stats.keys.sort
    assert_equal :ruby, s.stats[:backend]
    native.close
    s.close
    assert s.closed?
  end

  def test_a_subclass_hook_calling_super_reaches_the_ruby_loop
    calls = []
    tracing = Class.new(Farce::Scheduler) do
      define_method(:io_wait) do |io, events, timeout|
        calls << events
        super(io, events, timeout)
      end
    end
    got = nil
    scheduler = tracing.new(backend: :ruby)
    Fiber.set_scheduler(scheduler)
    r, w = IO.pipe
    Fiber.schedule { got = r.wait_readable(5) && r.read_nonblock(2) }
    Fiber.schedule { w.write("hi") }
    scheduler.run
    assert_equal "hi", got
    assert_includes calls, IO::READABLE
  ensure
    Fiber.set_scheduler(nil)
  end

  def test_farce_backend_ruby_selects_it_silently
    out, status = ruby_subprocess(<<~RUBY, env: { "FARCE_BACKEND" => "ruby" })
      require "farce"
      p Farce.run { Fiber.scheduler.backend }
    RUBY
    assert status.success?, out
    assert_equal ":ruby\n", out, "an explicit choice prints no warning"
  end

  # A copy of lib/ without the compiled extension: what a gem installed
  # without Go has. `status` plays extconf.rb's native_status.rb.
  def without_extension(status: nil)
    Dir.mktmpdir("farce-lib") do |dir|
      Dir.glob("**/*.rb", base: LIB).each do |file|
        FileUtils.mkdir_p(File.join(dir, File.dirname(file)))
        FileUtils.cp(File.join(LIB, file), File.join(dir, file))
      end
      if status
        File.write(File.join(dir, "farce", "native_status.rb"),
                   "module Farce; module Native; BUILD_SKIPPED = #{status.dump}; end; end\n")
      end
      yield dir
    end
  end

  def ruby_without_extension(code, status: nil, env: {})
    without_extension(status: status) do |dir|
      out = +""
      IO.popen({ "FARCE_BACKEND" => nil, "FARCE_REQUIRE_NATIVE" => nil }.merge(env),
               [RbConfig.ruby, "-I", dir, "-e", code], err: %i[child out]) do |io|
        reader = Thread.new { out << io.read }
        flunk "subprocess hung; output so far:\n#{out}" unless reader.join(60)
      end
      return [out, $?]
    end
  end

  def test_without_the_extension_every_kind_of_wait_runs_on_the_ruby_loop
    out, status = ruby_without_extension(child_script("ruby_loop_every_kind_of_wait"), status: "no Go toolchain found (test)")
    assert status.success?, out
    assert_match(/^backend=ruby loaded=false$/, out)
    assert_match(/^reason=no Go toolchain found \(test\)$/, out)
    assert_equal 1, out.scan(/farce: running on the pure-Ruby loop/).size, "the fallback is announced once:\n#{out}"
    assert_match(/^results=1,abc,ello,from_thread,timed_out,true,true$/, out)
    assert_match(/^epoll: needs farce's native core$/, out)
  end

  def test_without_the_extension_farce_require_native_refuses_the_ruby_loop
    out, status = ruby_without_extension(<<~RUBY, status: "no Go toolchain found (test)", env: { "FARCE_REQUIRE_NATIVE" => "1" })
      require "farce"
      begin
        Farce::Scheduler.new
        puts "no error"
      rescue Farce::Error => e
        puts e.message
      end
      puts Farce::Scheduler.new(backend: :ruby).backend # explicit: allowed
    RUBY
    assert status.success?, out
    assert_match(/no Go toolchain found \(test\) \(FARCE_REQUIRE_NATIVE is set/, out)
    assert_match(/^ruby$/, out)
  end

  def test_without_any_build_the_reason_says_how_to_build
    out, status = ruby_without_extension('require "farce"; puts Farce::Scheduler.new.fallback_reason')
    assert status.success?, out
    assert_match(/extension is not built for Ruby #{Regexp.escape(RUBY_VERSION)}/, out)
  end

end
