# frozen_string_literal: true

require_relative "apps_helper"
require "concurrent"

# Work done by threads that fibers wait for: concurrent-ruby's futures on
# its global pools, a fixed thread pool, its Event and CountDownLatch, and
# a plain ConditionVariable. The fibers wait through Mutex, ConditionVariable
# and Queue (the scheduler's block hook); a pool thread's completion wakes
# them (unblock, from another thread). Each case has a ticker fiber count
# while the fibers wait: the waits must leave the loop free.
class AppsThreadPoolsTest < Minitest::Test
  include ClientsSuite::Case

  def test_futures_on_the_global_pool
    clients_case("concurrent", "50 fibers wait on Promises.future values") do |c|
      ticks = ticking(c) do
        values = c.fibers(50) do |i|
          Concurrent::Promises.future(i) { |n| sleep 0.02; n * 3 }.value!(10)
        end
        assert_equal Array.new(50) { |i| i * 3 }, values
        chained = c.fibers(10) do |i|
          Concurrent::Promises.zip(*Array.new(5) { |k| Concurrent::Promises.future { i * 10 + k } })
                              .then { |*parts| parts.sum }.value!(10)
        end
        assert_equal Array.new(10) { |i| (0...5).sum { |k| i * 10 + k } }, chained
      end
      c.note("#{ticks} ticks while the fibers waited")
    end
  end

  def test_fixed_thread_pool_wakes_each_fiber
    clients_case("concurrent", "FixedThreadPool(4): 100 jobs, each wakes its fiber") do |c|
      pool = Concurrent::FixedThreadPool.new(4)
      ticks = ticking(c) do
        values = c.fibers(100) do |i|
          result = Concurrent::IVar.new
          pool.post do
            sleep 0.002
            result.set(i * i)
          end
          result.value(10)
        end
        assert_equal Array.new(100) { |i| i * i }, values
      end
      pool.shutdown
      assert pool.wait_for_termination(10), "the pool did not stop"
      c.note("#{ticks} ticks while the fibers waited")
    end
  end

  def test_event_and_latch_set_by_a_pool_thread
    clients_case("concurrent", "Event and CountDownLatch set by threads wake 20 fibers") do |c|
      event = Concurrent::Event.new
      latch = Concurrent::CountDownLatch.new(5)
      ticks = ticking(c) do
        waiters = c.fiber { c.fibers(20) { |i| [event.wait(10), latch.wait(10), i] } }
        Concurrent::Promises.future { sleep 0.05; event.set }
        5.times { Concurrent::Promises.future { sleep 0.05; latch.count_down } }
        assert_equal Array.new(20) { |i| [true, true, i] }, waiters.value
      end
      c.note("#{ticks} ticks while the fibers waited")
    end
  end

  def test_condition_variable_woken_by_a_thread_and_by_a_fiber
    clients_case("concurrent", "ConditionVariable#wait(m, 10) woken by a thread, a fiber") do |c|
      mutex = Mutex.new
      cv = ConditionVariable.new
      state = nil
      ticks = ticking(c) do
        [[:thread, -> { Thread.new { sleep 0.05; mutex.synchronize { state = :thread; cv.signal } }.join }],
         [:fiber, -> { c.fiber { sleep 0.05; mutex.synchronize { state = :fiber; cv.signal } }.value }]].each do |name, waker|
          state = nil
          woken = c.fiber do
            mutex.synchronize do
              cv.wait(mutex, 10) until state
              state
            end
          end
          waker.call
          assert_equal name, woken.value
        end
      end
      c.note("#{ticks} ticks while the fibers waited")
    end
  end

  # Runs the block with a fiber ticking every millisecond; returns the ticks
  # counted while the block ran (not the ticker's last one, which comes when
  # it is stopped), asserting there were some: the waits left the loop free.
  def ticking(c)
    ticks = 0
    running = true
    ticker = c.fiber do
      while running
        sleep 0.001
        ticks += 1
      end
    end
    begin
      yield
      during = ticks
    ensure
      running = false
      ticker.value
    end
    assert_operator during, :>, 0, "no other fiber ran while the fibers waited for the threads"
    during
  end
end
