# frozen_string_literal: true

require_relative "test_helper"

# Ruby's order for the thread's own code (its test/fiber relies on it, and
# its reference scheduler keeps it): Fiber.schedule runs the new fiber until
# it first blocks, and no other scheduled fiber runs until the thread itself
# reaches `run` (or the scheduler's close at thread exit), however long the
# thread's code takes. TestFiberSleep#test_sleep spawns five fibers that
# sleep 0, 10, ... 40 ms and expects five parked: on a busy machine the
# spawner took longer than the turn budget (0.5 ms) between two
# Fiber.schedule calls, the loop got a turn there, and the sleep(0) fiber
# finished in it (4 parked). Here the thread's own fiber busy-waits past
# the budget between spawns, deterministically: no turn may be given.
class TestSpawnOrder < Minitest::Test
  BUSY = 0.003 # six times the default turn budget

  def spin(seconds)
    t0 = monotonic
    nil while monotonic - t0 < seconds
  end

  def test_fibers_spawned_by_the_threads_own_fiber_wait_for_run
    items = []
    parked = nil
    stats = nil
    Thread.new do
      scheduler = Farce::Scheduler.new(backend: backend)
      Fiber.set_scheduler(scheduler)
      5.times do |i|
        spin(BUSY)
        Fiber.schedule do
          sleep(i / 100.0)
          items << i
        end
        spin(BUSY)
      end
      stats = scheduler.stats
      parked = stats[:parked_fibers]
    end.join(30) or flunk "hung"
    assert_equal 5, parked, "a fiber ran (and finished) before the thread reached run: #{items.inspect}"
    assert_equal 0, stats[:turns_given]
    assert_equal [0, 1, 2, 3, 4], items
  end
end
