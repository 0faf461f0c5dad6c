# frozen_string_literal: true

require_relative "test_helper"

class TestInterrupts < Minitest::Test
  def test_timeout_timeout_in_a_fiber
    farce do
      t = monotonic
      assert_raises(Timeout::Error) { Timeout.timeout(0.05) { sleep 1 } }
      assert_operator monotonic - t, :<, 0.5
      r, _w = IO.pipe
      assert_raises(Timeout::Error) { Timeout.timeout(0.02) { r.read(1) } }
      assert_equal :done, Timeout.timeout(1) { sleep 0.01; :done }
    end
  end

  def test_timeout_with_a_custom_class_and_message
    my_error = Class.new(StandardError)
    farce do
      error = assert_raises(my_error) { Timeout.timeout(0.01, my_error, "too slow") { sleep 1 } }
      assert_equal "too slow", error.message
    end
  end

  def test_timeout_does_not_fire_after_the_block
    farce do
      Timeout.timeout(0.02) { :quick }
      sleep 0.05 # the cancelled alarm must not raise here
    end
  end

  def test_many_timeouts_in_many_fibers
    fired = 0
    farce do
      100.times do |i|
        Fiber.schedule do
          # even: a long sleep that must time out; odd: a short one with a wide margin
          Timeout.timeout(i.even? ? 0.01 + (i % 3) * 0.01 : 2) { sleep(i.even? ? 1 : 0.001) }
        rescue Timeout::Error
          fired += 1
        end
      end
    end
    assert_equal 50, fired
  end

  def test_thread_raise_reaches_a_thread_whose_fibers_are_all_parked
    started = Queue.new
    thread = Thread.new do
      Thread.current.report_on_exception = false
      Farce.run(backend: backend) do
        Fiber.schedule { sleep 10 }
        r, _w = IO.pipe
        Fiber.schedule { started << true; r.read(1) }
      end
    end
    started.pop
    sleep 0.05
    t = monotonic
    thread.raise(Interrupt, "stop")
    assert_raises(Interrupt) { thread.join(5) }
    assert_operator monotonic - t, :<, 1
  end

  def test_thread_kill
    thread = Thread.new { Farce.run(backend: backend) { Fiber.schedule { sleep 10 } } }
    sleep 0.05
    t = monotonic
    thread.kill
    assert thread.join(5)
    assert_operator monotonic - t, :<, 1
  end

  def test_int_trap_runs_while_every_fiber_is_parked
    out, status = ruby_subprocess(<<~RUBY)
      require "farce"
      trapped = 0
      Signal.trap("INT") { trapped += 1 }
      Farce.run(backend: :#{backend}) do
        r, w = IO.pipe
        Fiber.schedule { r.read(1); puts "read done" }
        Thread.new { 3.times { sleep 0.05; Process.kill(:INT, Process.pid) }; sleep 0.05; w.write("x") }
        sleep 0.3
      end
      puts "trapped \#{trapped}"
    RUBY
    assert status.success?, out
    assert_match(/read done/, out)
    assert_match(/trapped 3/, out)
  end

  def test_default_int_raises_interrupt_out_of_the_loop
    out, status = ruby_subprocess(<<~RUBY)
      require "farce"
      # Ruby's own handler, even when SIGINT came in ignored (a shell hands
      # it down ignored to what it starts in the background with `&`)
      trap(:INT, "DEFAULT")
      begin
        Farce.run(backend: :#{backend}) do
          Thread.new { sleep 0.1; Process.kill(:INT, Process.pid) }
          Fiber.schedule { sleep 30 }
        end
      rescue Interrupt
        puts "interrupted"
      end
    RUBY
    assert status.success?, out
    assert_match(/interrupted/, out)
  end
end
