# frozen_string_literal: true

require_relative "test_helper"

class TestSleepAndSync < Minitest::Test
  def test_sleeps_run_concurrently
    t = monotonic
    farce { 10.times { Fiber.schedule { sleep 0.1 } } }
    elapsed = monotonic - t
    assert_operator elapsed, :>=, 0.1
    # One after another they would take at least 1 s, however fast the
    # machine: the bound proves the overlap and leaves room for a slow one
    # (the first scheduler starts Go; under qemu-user that alone took 0.4 s).
    assert_operator elapsed, :<, 1.0, "ten 0.1 s sleeps in fibers must overlap"
  end

  # Woken by deadline, not in the order they slept. Each deadline is taken
  # as its sleep begins: a spawner held up between two Fiber.schedule calls
  # (over 10 ms on a busy machine) moves the later fibers' deadlines, and
  # the order with them (0.03 then 0.02 was right there). Deadlines closer
  # than 2 ms may come either way (the hook reads the clock a little later).
  def test_sleep_order_follows_deadlines
    woken = []
    deadlines = {}
    farce do
      [0.03, 0.01, 0.02].each do |d|
        Fiber.schedule do
          deadlines[d] = monotonic + d
          sleep d
          woken << d
        end
      end
    end
    assert_equal [0.01, 0.02, 0.03], woken.sort
    woken.each_cons(2) do |a, b|
      assert_operator deadlines[a], :<=, deadlines[b] + 0.002, "woken #{woken.inspect}, deadlines #{deadlines.inspect}"
    end
  end

  def test_sleep_zero_yields_to_other_fibers
    order = []
    # no turns: the order below needs the spawner to hold the loop between
    # its two Fiber.schedule calls (a loaded machine can spend a turn
    # budget there, and the turn would run a's next step first)
    farce(turn_budget: nil) do
      Fiber.schedule { 3.times { |i| order << "a#{i}"; sleep 0 } }
      Fiber.schedule { 3.times { |i| order << "b#{i}"; sleep 0 } }
    end
    assert_equal %w[a0 b0 a1 b1 a2 b2], order
  end

  def test_sleep_forever_is_woken_by_an_exception
    message = nil
    farce do
      sleeper = Fiber.schedule do
        sleep
      rescue RuntimeError => e
        message = e.message
      end
      Fiber.schedule { sleep 0.01; sleeper.raise("wake up") }
    end
    assert_equal "wake up", message
  end

  def test_queue_between_fibers
    got = []
    farce do
      q = Queue.new
      Fiber.schedule { 3.times { got << q.pop } }
      Fiber.schedule { 3.times { |i| q << i; sleep 0.001 } }
    end
    assert_equal [0, 1, 2], got
  end

  def test_queue_pop_with_timeout
    skip "Queue#pop(timeout:) needs Ruby 3.2" if RUBY_VERSION < "3.2"
    farce do
      q = Queue.new
      t = monotonic
      assert_nil q.pop(timeout: 0.05)
      assert_operator monotonic - t, :>=, 0.045
    end
  end

  def test_sized_queue_back_pressure
    got = []
    farce do
      q = SizedQueue.new(2)
      Fiber.schedule { 10.times { |i| q << i }; q.close }
      Fiber.schedule { while (v = q.pop); got << v; end }
    end
    assert_equal (0...10).to_a, got
  end

  def test_cross_thread_queue_push_wakes_a_parked_fiber
    got = nil
    q = Queue.new
    pusher = nil
    t = monotonic
    farce do
      Fiber.schedule { got = q.pop }
      pusher = Thread.new { sleep 0.05; q << :from_thread }
    end
    pusher.join
    assert_equal :from_thread, got
    assert_operator monotonic - t, :<, 1
  end

  def test_many_threads_push_into_fibers_no_lost_wakeups
    threads = 4
    per_thread = 500
    queues = Array.new(threads) { Queue.new }
    counts = Array.new(threads, 0)
    farce do
      queues.each_with_index do |q, i|
        Fiber.schedule { per_thread.times { q.pop; counts[i] += 1 } }
      end
      pushers = queues.map { |q| Thread.new { per_thread.times { |k| q << k; Thread.pass if k % 50 == 0 } } }
      Fiber.schedule { sleep 0.001 until pushers.none?(&:alive?) }
    end
    assert_equal [per_thread] * threads, counts
  end

  def test_mutex_between_fibers
    log = []
    farce do
      m = Mutex.new
      3.times do |i|
        Fiber.schedule do
          m.synchronize do
            log << [:in, i]
            sleep 0.01
            log << [:out, i]
          end
        end
      end
    end
    assert_equal 6, log.size
    log.each_slice(2) { |(a, ai), (b, bi)| assert_equal [:in, :out, ai], [a, b, bi] }
  end

  def test_mutex_held_by_another_thread
    m = Mutex.new
    locked = Queue.new
    holder = Thread.new { m.synchronize { locked << true; sleep 0.05 } }
    locked.pop
    t = monotonic
    farce { Fiber.schedule { m.synchronize { :ok } } }
    assert_operator monotonic - t, :>=, 0.03
    holder.join
  end

  def test_condition_variable
    result = []
    farce do
      m = Mutex.new
      cv = ConditionVariable.new
      ready = false
      Fiber.schedule do
        m.synchronize do
          cv.wait(m) until ready
          result << :woken
        end
      end
      Fiber.schedule do
        sleep 0.01
        m.synchronize { ready = true; cv.signal }
      end
    end
    assert_equal [:woken], result
  end

  def test_condition_variable_wait_with_timeout
    farce do
      m = Mutex.new
      cv = ConditionVariable.new
      t = monotonic
      m.synchronize { cv.wait(m, 0.05) }
      assert_operator monotonic - t, :>=, 0.045
    end
  end

  def test_thread_join_and_value_inside_a_fiber
    value = nil
    ticks = 0
    farce do
      Fiber.schedule { 5.times { sleep 0.01; ticks += 1 } }
      value = Thread.new { sleep 0.03; :thread_value }.value
    end
    assert_equal :thread_value, value
    assert_equal 5, ticks
  end
end
