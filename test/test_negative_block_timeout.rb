# frozen_string_literal: true

require_relative "test_helper"

# Ruby hands Queue#pop(timeout:), SizedQueue#push(timeout:) and
# Thread#join(limit) timeouts to the scheduler's `block` unchecked, and
# without a scheduler a negative one times out at once (they return nil).
# farce's check for bad timeouts raised ArgumentError there instead
# (docs/contracts.md). Each call here is compared with the same call made
# without a scheduler.
class TestNegativeBlockTimeout < Minitest::Test
  CALLS = {
    queue_pop: -> { Thread::Queue.new.pop(timeout: -1) },
    queue_pop_fraction: -> { Thread::Queue.new.pop(timeout: -0.25) },
    sized_queue_push: lambda {
      q = Thread::SizedQueue.new(1)
      q << 1
      q.push(2, timeout: -1)
    },
    thread_join: -> { Thread.new { sleep 0.2 }.join(-1) }
  }.freeze

  def outcome(call)
    [:returned, call.call]
  rescue StandardError => e
    [:raised, e.class]
  end

  def test_negative_timeouts_time_out_at_once_as_without_a_scheduler
    skip "Queue#pop(timeout:) is Ruby 3.2+" if RUBY_VERSION < "3.2"
    plain = CALLS.transform_values { |call| outcome(call) }
    assert_equal({ queue_pop: [:returned, nil], queue_pop_fraction: [:returned, nil],
                   sized_queue_push: [:returned, nil], thread_join: [:returned, nil] }, plain)
    scheduled = nil
    farce do
      scheduled = CALLS.transform_values { |call| outcome(call) }
    end
    assert_equal plain, scheduled
  end

  # A fiber unblocked before it blocks with a negative timeout: woken.
  def test_block_with_a_negative_timeout_after_an_early_unblock_is_woken
    results = nil
    farce do
      scheduler = Fiber.scheduler
      results = [scheduler.block(:x, -1)]
      scheduler.unblock(:x, Fiber.current)
      results << scheduler.block(:x, -1)
    end
    assert_equal [false, true], results
  end
end
