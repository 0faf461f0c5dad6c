# frozen_string_literal: true

require_relative "test_helper"

# The wake-up latency histogram behind stats' wakeup_* keys is kept from the
# first stats call on: a loop whose stats nobody reads stamps no wait and
# records nothing (it cost 2-3% of a Queue hand-off). Both front ends and
# the Ruby loop answer the same way.
class TestWakeupLatency < Minitest::Test
  include FarceTestHelper

  SLEEPS = 50

  def test_scheduler_counts_wakeups_from_the_first_stats_call
    first = second = nil
    farce do
      SLEEPS.times { sleep 0.0001 } # woken before anyone asked: not counted
      first = Fiber.scheduler.stats
      SLEEPS.times { sleep 0.0001 }
      second = Fiber.scheduler.stats
    end
    assert_equal 0, first[:wakeups], "nothing is recorded before the first stats call"
    assert_equal 0.0, first[:wakeup_max]
    # the last resume of a batch is handed to the core at the poll after it
    assert_operator second[:wakeups], :>=, SLEEPS - 2
    assert_operator second[:wakeups], :<=, SLEEPS + 1, "only what came after the first call"
    assert_operator second[:wakeup_p50], :<=, second[:wakeup_max]
  end

  def test_selector_counts_wakeups_from_the_first_stats_call
    skip_on_ruby_loop("has no io-event selector")
    with_env("FARCE_BACKEND" => backend.to_s) do # the selector's backend (auto when not named)
      selector = Farce::IOEventSelector.new(Fiber.current) # used directly, without Async
      r, w = IO.pipe
      wake_one = lambda do
        fiber = Fiber.new do
          selector.io_wait(Fiber.current, r, IO::READABLE)
          selector.transfer # back to the loop fiber
        end
        fiber.transfer # parks on the pipe, back here
        w.write("x")
        selector.select(1) # resumes it
        r.read(1)
      end
      SLEEPS.times { wake_one.call } # woken before anyone asked: not counted
      first = selector.stats[:wakeups]
      SLEEPS.times { wake_one.call }
      second = selector.stats[:wakeups]
      assert_equal 0, first, "nothing is recorded before the first stats call"
      assert_operator second, :>=, SLEEPS - 2
      assert_operator second, :<=, SLEEPS + 1, "only what came after the first call"
    ensure
      selector&.close
      r&.close
      w&.close
    end
  end
end
