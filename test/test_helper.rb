# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "farce"
require "minitest/autorun"
require "rbconfig"
require "socket"
require "timeout"

module FarceTestHelper
  LIB = File.expand_path("../lib", __dir__)

  # The backend under test: FARCE_BACKEND, or :auto.
  def backend
    (ENV["FARCE_BACKEND"] || "auto").to_sym
  end

  # FARCE_BACKEND=ruby: the suite runs on farce's pure-Ruby loop.
  def ruby_loop?
    backend == :ruby
  end

  # For tests about the Go core itself (its runtime, goroutines, fork
  # rules, io_uring): the Ruby loop has none of it.
  def skip_on_ruby_loop(why)
    skip "the Ruby loop (FARCE_BACKEND=ruby) #{why}" if ruby_loop?
  end

  # The backends a test that covers several runs on: the one FARCE_BACKEND
  # names (when it is in `all`), else all of them; those this system lacks
  # are left out.
  def backends_under_test(all)
    named = ENV["FARCE_BACKEND"]
    wanted = named && named != "auto" ? [named.to_sym] & all : all
    wanted.select { |b| backend_available?(b) }
  end

  # The backends of the Go core; a test that covers several runs on these
  # unless it names its own. A Windows Ruby has IOCP alone.
  NATIVE_BACKENDS = (Gem.win_platform? ? %i[iocp] : %i[epoll poll io_uring]).freeze

  # Yields each backend of `only` under test (backends_under_test); skips
  # the test when none is available or selected.
  def each_backend(only = NATIVE_BACKENDS)
    list = backends_under_test(only)
    skip "none of #{only.inspect} available or selected" if list.empty?
    list.each { |b| yield b }
  end

  # Runs the block with the environment variables `vars` names set (nil
  # removes one), then puts back what was there. A test that saved a value
  # by hand and skipped before saving it used to "restore" nil, which
  # removed FARCE_BACKEND for every test after it: the Ruby loop's leg then
  # went on testing :auto, and only in some orders.
  def with_env(vars)
    saved = vars.keys.to_h { |name| [name, ENV[name]] }
    vars.each { |name, value| ENV[name] = value }
    yield
  ensure
    saved&.each { |name, value| ENV[name] = value }
  end

  def needs_ruby(version)
    skip "needs Ruby #{version}+" if Gem::Version.new(RUBY_VERSION) < Gem::Version.new(version)
  end

  # For child scripts that call the io_read hook by hand: it takes an offset
  # from Ruby 3.2 on (`s.io_read(r, buffer, 1, *OFFSET)`).
  OFFSET_DEFINITION = 'OFFSET = RUBY_VERSION >= "3.2" ? [0] : []'

  BACKENDS_AVAILABLE = {} # rubocop:disable Style/MutableConstant

  # Whether Farce::Scheduler.new(backend: name) works here (asked once per
  # process, in a child: a kernel without io_uring must not fail the suite).
  def backend_available?(name)
    return true if name == :ruby
    return BACKENDS_AVAILABLE[name] if BACKENDS_AVAILABLE.key?(name)

    out, = ruby_subprocess(<<~RUBY, timeout: 30)
      require "farce"
      s = Farce::Scheduler.new(backend: :#{name}) rescue (puts "no"; exit)
      puts s.backend == :#{name} ? "yes" : "no"
      s.close
    RUBY
    BACKENDS_AVAILABLE[name] = out.include?("yes")
  end

  def farce(**options, &block)
    Farce.run(backend: backend, **options, &block)
  end

  # Farce.run on the named backend, the block given the scheduler; a hang
  # fails after 30 seconds.
  def farce_on(name, &block)
    Timeout.timeout(30) do
      Farce.run(backend: name) { block.call(Fiber.scheduler) }
    end
  end

  # What each open descriptor of this process is (a path, pipe:[inode],
  # anon_inode:[eventfd], ...), after a GC: IOs that earlier tests dropped
  # without close are finalized now, not in the middle of a comparison.
  def open_descriptors
    GC.start
    Dir.children("/proc/self/fd").filter_map { |fd| File.readlink("/proc/self/fd/#{fd}") rescue nil }.sort
  end

  # Fails, naming them, if descriptors are open now that were not in
  # `before` (from open_descriptors). Descriptors closed meanwhile do not
  # count: a GC finalizing some other test's IO is no leak of this one.
  def assert_no_descriptor_left_open(before, what)
    left = open_descriptors
    before.each do |target|
      index = left.index(target)
      left.delete_at(index) if index
    end
    assert_empty left, "#{what} left descriptors open"
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  SCRIPTS = File.expand_path("scripts", __dir__)

  # The child script test/scripts/NAME.rb as code for ruby_subprocess, after
  # a constant for each parameter: child_script("x", BACKEND: :epoll) starts
  # with `BACKEND = :epoll`.
  def child_script(name, **parameters)
    parameters.map { |constant, value| "#{constant} = #{value.inspect}\n" }.join +
      File.read(File.join(SCRIPTS, "#{name}.rb"))
  end

  # Runs Ruby code in a child process with farce on the load path; returns
  # [stdout+stderr, status]. A hang fails after `timeout` seconds.
  # ruby_options: more of ruby's own options (--disable-gems).
  def ruby_subprocess(code, timeout: 30, env: {}, ruby_options: [])
    out = +""
    IO.popen(env, [RbConfig.ruby, *ruby_options, "-I", LIB, "-e", code], err: %i[child out], pgroup: true) do |io|
      reader = Thread.new { out << io.read }
      unless reader.join(timeout)
        Process.kill(:KILL, -io.pid) # the whole group: forked grandchildren hold the pipe too
        reader.join(5)
        flunk "subprocess hung for #{timeout}s; output so far:\n#{out}"
      end
    end
    [out, $?]
  end
end

Minitest::Test.include(FarceTestHelper)

# The leg a suite runs as (FARCE_BACKEND) must be the same after every test
# as before it: a test that changed it for good would put every test after
# it on another backend, in some orders only, with nothing failing.
module FarceBackendUnchanged
  LEG = ENV["FARCE_BACKEND"]

  def after_teardown
    super
    return if ENV["FARCE_BACKEND"] == LEG

    found = ENV["FARCE_BACKEND"]
    ENV["FARCE_BACKEND"] = LEG # the tests after this one run on the leg's backend
    # first among the test's results: a skip listed before it would
    # otherwise make minitest count the test as skipped
    failure = Minitest::Assertion.new("FARCE_BACKEND is #{found.inspect} after this test, #{LEG.inspect} before it")
    failure.set_backtrace(caller)
    failures.unshift(failure)
  end
end
Minitest::Test.prepend(FarceBackendUnchanged)
