# frozen_string_literal: true

require_relative "test_helper"

class TestSchedulerAPI < Minitest::Test
  def test_run_returns_the_block_value_and_restores_the_scheduler
    assert_equal 42, farce { 42 }
    assert_nil Fiber.scheduler
  end

  def test_backend_and_fallback_reason
    s = Farce::Scheduler.new(backend: backend)
    expected = backend == :auto ? %i[io_uring epoll poll] : [backend]
    assert_includes expected, s.backend
    assert(s.fallback_reason.nil? || s.fallback_reason.is_a?(String))
    s.close
  end

  def test_explicit_backends
    %i[epoll poll].each do |name|
      s = Farce::Scheduler.new(backend: name)
      assert_equal name, s.backend
      assert_nil s.fallback_reason
      s.close
    end
  end

  def test_unknown_backend_names_the_choices
    error = assert_raises(ArgumentError) { Farce::Scheduler.new(backend: :nope) }
    assert_match(/:nope/, error.message)
    assert_match(/:epoll/, error.message)
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: 42) }
  end

  def test_farce_backend_environment_variable_is_the_default
    out, status = ruby_subprocess(<<~RUBY, env: { "FARCE_BACKEND" => "poll" })
      require "farce"
      print Farce::Scheduler.new.backend
    RUBY
    assert status.success?, out
    assert_equal "poll", out
  end

  def test_closed_and_close_twice
    s = Farce::Scheduler.new(backend: backend)
    refute s.closed?
    s.close
    assert s.closed?
    s.close # no error
    assert_raises(Farce::Error) { s.stats }
    assert_raises(Farce::Error) { s.run }
  end

  def test_stats
    # No turns (turn_budget: nil): with the default budget of 0.5 ms, a
    # fiber that reached its hook late (a loaded CI machine, qemu) gave the
    # loop a turn first and was not in its wait yet when stats ran (its pipe
    # not registered, its timer not set).
    farce(turn_budget: nil) do
      r, w = IO.pipe
      Fiber.schedule { r.read(1) }
      Fiber.schedule { sleep 0.05 }
      stats = Fiber.scheduler.stats
      assert_equal 3, stats[:fibers] # the Farce.run block's fiber and two more
      assert_equal 2, stats[:pending_waits]
      assert_equal 1, stats[:timers]
      assert_equal 1, stats[:registered_descriptors]
      if ruby_loop?
        assert_equal 0, stats[:goroutines] # no Go: the key is kept, with nothing to count
      else
        assert_operator stats[:goroutines], :>=, 1
      end
      w.write("x")
    end
  end

  def test_iterations_grow
    scheduler = Farce::Scheduler.new(backend: backend)
    Fiber.set_scheduler(scheduler)
    Fiber.schedule { 3.times { sleep 0 } }
    scheduler.run
    assert_operator scheduler.stats[:iterations], :>=, 3
  ensure
    Fiber.set_scheduler(nil)
  end

  def test_fiber_schedule_starts_at_once_and_returns_when_it_blocks
    order = []
    farce do
      Fiber.schedule do
        order << :started
        sleep 0.01
        order << :resumed
      end
      order << :returned
    end
    assert_equal %i[started returned resumed], order
  end

  def test_exception_in_a_fiber_propagates_out_of_run
    error = assert_raises(RuntimeError) do
      farce do
        Fiber.schedule do
          sleep 0.01
          raise "boom"
        end
      end
    end
    assert_equal "boom", error.message
    assert_nil Fiber.scheduler
  end

  def test_exception_propagates_out_of_set_scheduler_close
    thread = Thread.new do
      Thread.current.report_on_exception = false
      Fiber.set_scheduler(Farce::Scheduler.new(backend: backend))
      Fiber.schedule do
        sleep 0.01
        raise ArgumentError, "from fiber"
      end
    end
    error = assert_raises(ArgumentError) { thread.join }
    assert_equal "from fiber", error.message
  end

  def test_thread_exit_runs_every_fiber
    done = []
    Thread.new do
      Fiber.set_scheduler(Farce::Scheduler.new(backend: backend))
      3.times { |i| Fiber.schedule { sleep 0.01 * i; done << i } }
    end.join
    assert_equal [0, 1, 2], done
  end

  class Tracing < Farce::Scheduler
    attr_reader :calls

    def io_wait(io, events, timeout)
      (@calls ||= []) << :io_wait
      super
    end

    def kernel_sleep(*duration)
      (@calls ||= []) << :kernel_sleep
      super
    end
  end

  def test_hooks_can_be_overridden_and_call_super
    scheduler = Tracing.new(backend: backend)
    Fiber.set_scheduler(scheduler)
    Fiber.schedule do
      sleep 0.001
      r, w = IO.pipe
      Fiber.schedule { r.wait_readable }
      w.write("x")
    end
    scheduler.run
    assert_includes scheduler.calls, :kernel_sleep
    assert_includes scheduler.calls, :io_wait
  ensure
    Fiber.set_scheduler(nil)
  end

  def test_version_and_error_class
    assert_match(/\A\d+\.\d+\.\d+/, Farce::VERSION)
    assert_operator Farce::Error, :<, StandardError
  end

  # Ruby's own test harness runs its child processes with --disable-gems
  # (test/fiber's test_close_at_exit, test_mutex_deadlock): farce must load
  # and run there, on the native core and on the Ruby loop, without Gem.
  def test_loads_and_runs_without_rubygems
    %w[auto ruby].each do |backend|
      code = "require 'farce'; Farce.run(backend: :#{backend}) { Fiber.schedule { sleep 0; print :ran } }"
      out = IO.popen([RbConfig.ruby, "--disable-gems", "-I", LIB, "-e", code], err: %i[child out], &:read)
      assert $?.success?, "backend #{backend} with --disable-gems: #{out}"
      assert_equal "ran", out, "backend #{backend}"
    end
  end
end
