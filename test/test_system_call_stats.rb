# frozen_string_literal: true

require_relative "test_helper"

# stats counts the system calls the loop makes, so that users can see what
# io_uring batches: io_uring_enters (0 on other backends), driver_calls (the
# driver's waits, registrations and enters), transfer_calls (the reads and
# writes the extension made itself) and system_calls, their sum. The counts
# are exact, not timed: a pipe ping-pong makes a known number of calls.
class TestSystemCallStats < Minitest::Test
  ROUND_TRIPS = 500

  # Runs ROUND_TRIPS pipe round trips between two fibers and returns the
  # stats taken just before and just after them.
  def ping_pong_stats(backend)
    before = after = nil
    Farce.run(backend: backend) do
      r1, w1 = IO.pipe
      r2, w2 = IO.pipe
      Fiber.schedule do
        while (byte = r1.read(1))
          w2.write(byte)
        end
      end
      Fiber.schedule do
        w1.write("x") # warm-up: both descriptors are known, ops mode reached
        r2.read(1)
        before = Fiber.scheduler.stats
        ROUND_TRIPS.times do
          w1.write("x")
          r2.read(1)
        end
        after = Fiber.scheduler.stats
        w1.close
      end
    end
    [before, after]
  end

  def test_the_counts_add_up_on_every_backend
    each_backend do |b|
      before, after = ping_pong_stats(b)
      %i[io_uring_enters driver_calls transfer_calls system_calls].each do |key|
        assert_kind_of Integer, after[key], "#{b}: #{key}"
      end
      assert_equal after[:driver_calls] + after[:transfer_calls], after[:system_calls], b
      # at least the two writes of each round trip are the extension's own calls
      assert_operator after[:transfer_calls] - before[:transfer_calls], :>=, 2 * ROUND_TRIPS, b
      # the reader parks at least once per round trip, so the driver is asked
      assert_operator after[:driver_calls] - before[:driver_calls], :>=, ROUND_TRIPS, b
      if b == :io_uring
        assert_operator after[:io_uring_enters], :<=, after[:driver_calls], b
      else
        assert_equal 0, after[:io_uring_enters], b
      end
    end
  end

  # The batching io_uring promises: a round trip's reads are completion
  # operations submitted by the loop's one io_uring_enter of each turn (one
  # turn per side), and no read system call of the extension's own. epoll
  # needs a wait per side and a read that finds the pipe empty.
  def test_io_uring_enters_once_per_turn_on_a_ping_pong
    each_backend(%i[io_uring]) do |b|
      before, after = ping_pong_stats(b)
      skip "io_uring without completion operations here" unless after[:completion_ops]
      enters = after[:io_uring_enters] - before[:io_uring_enters]
      calls = after[:system_calls] - before[:system_calls]
      assert_operator enters, :<=, 2 * ROUND_TRIPS + 10, "#{b}: #{enters} enters for #{ROUND_TRIPS} round trips"
      # two writes and two enters per round trip, where epoll makes 8
      assert_operator calls, :<=, 4 * ROUND_TRIPS + 20, "#{b}: #{calls} system calls for #{ROUND_TRIPS} round trips"
    end
  end
end
