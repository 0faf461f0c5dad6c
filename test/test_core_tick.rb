# frozen_string_literal: true

require_relative "test_helper"

# Go's sysmon takes the P of a thread whose goroutine has not passed through
# Go's scheduler for 10 ms, and then polls every 20 us for a while. A poll
# moves the Ruby thread's tick, but with many fibers ready one loop iteration
# runs Ruby for longer than that: the loop then moves it between turns, every
# 2 ms of them without a poll (event_loop.h, FARCE_CORE_TICK_NS). No timing is asserted: an
# iteration made long on purpose must count ticks, which it cannot when the
# turns never call into the core.
class TestCoreTick < Minitest::Test
  BUSY = 0.0005 # seconds of work per fiber per round
  FIBERS = 100  # so that one round of them (an iteration) takes about 50 ms
  ROUNDS = 3
  ROUND = 0.08  # seconds from one round's start to the next: longer than its turns

  def busy(seconds)
    deadline = monotonic + seconds
    nil while monotonic < deadline
  end

  def test_iterations_of_50_ms_of_turns_move_the_tick_between_them
    skip_on_ruby_loop("has no Go core")
    each_backend do |name|
      stats = nil
      farce_on(name) do
        scheduler = Fiber.scheduler
        done = 0
        start = monotonic
        FIBERS.times do
          Fiber.schedule do
            ROUNDS.times do |round|
              # every fiber sleeps to the same deadline, so that their timers
              # fire in the same poll: one long iteration per round, with no
              # poll in it (a sleep of its own after each fiber's work made
              # deadlines a turn apart, and a poll every few turns)
              wake_at = start + ((round + 1) * ROUND)
              left = wake_at - monotonic
              sleep left if left.positive?
              busy(BUSY)
            end
            done += 1
            stats = scheduler.stats if done == FIBERS
          end
        end
      end
      refute_nil stats, name
      # about 150 ms of turns in three iterations: a tick every 2 ms of them,
      # so more than 20 even if most were late; polls move the tick
      # themselves and are not counted
      assert_operator stats[:core_ticks], :>=, 20, "#{name}: #{stats.slice(:core_ticks, :iterations)}"
    end
  end
end
