# frozen_string_literal: true

require_relative "test_helper"

# io_uring queues a read operation when a fiber parks and submits it at the
# loop's next poll; the kernel resolves its descriptor number only then.
# Other fibers run before that poll: one that closes the IO and opens a
# file that gets the same number must not have the parked read take the
# new file's data. The loop checks every queued operation against its IO
# before it polls, and cancels those whose IO lost the number: the parked
# fiber gets IOError, as a closed readiness wait does, and the new file
# keeps its bytes. Both front ends share that poll.
class TestIOURingFdReuse < Minitest::Test
  include FarceTestHelper

  def setup
    scheduler = Farce::Scheduler.new(backend: :io_uring)
    ops = scheduler.stats[:completion_ops]
    scheduler.close
    skip "io_uring offers no completion operations here" unless ops
  rescue Farce::Error, ArgumentError => e
    skip "io_uring cannot be set up here: #{e.message}"
  end

  # The new pipe's reader looks only after the loop polled (with the old
  # read submitted, had it not been cancelled), without waiting: bytes
  # taken by the old read would show as :wait_readable, not as a hang.
  def test_scheduler_read_whose_io_was_closed_and_its_number_reused_before_the_poll
    result = fresh = reused = submitted = nil
    Farce.run(backend: :io_uring) do
      r1, w1 = IO.pipe
      fd = r1.fileno
      Fiber.schedule do
        result = begin
          r1.readpartial(10)
        rescue IOError => e
          e
        end
      end
      # that fiber parked in a read operation; the loop has not polled since
      submitted = Fiber.scheduler.stats[:completion_ops_submitted]
      Fiber.schedule do
        r1.close
        r2, w2 = IO.pipe
        reused = r2.fileno == fd
        w2.write("new")
        sleep 0.05 # the loop polls (more than once)
        fresh = r2.read_nonblock(10, exception: false)
        [w1, r2, w2].each(&:close)
      end
    end
    assert_equal 1, submitted, "the parked read was no completion operation"
    skip "the new pipe did not reuse the number" unless reused
    assert_kind_of IOError, result, "the read of the closed IO answered #{result.inspect}"
    assert_equal "new", fresh, "the new pipe's bytes"
  end

  # The same through Farce::IOEventSelector: the loop fiber itself closes
  # the IO and reuses its number between the read's park and select.
  def test_selector_read_whose_io_was_closed_and_its_number_reused_before_select
    with_env("FARCE_BACKEND" => "io_uring") do
      selector = Farce::IOEventSelector.new(Fiber.current)
      r1, w1 = IO.pipe
      fd = r1.fileno
      result = nil
      reader = Fiber.new do
        result = begin
          selector.io_read(reader, r1, IO::Buffer.new(10), 1, 0)
        rescue IOError => e
          e
        end
        selector.loop.transfer
      end
      reader.transfer # parks in a read operation, back here
      submitted = selector.stats[:completion_ops_submitted]
      r1.close
      r2, w2 = IO.pipe
      w2.write("new")
      deadline = monotonic + 5
      selector.select(0.01) while result.nil? && monotonic < deadline
      fresh = r2.read_nonblock(10, exception: false)
      assert_equal 1, submitted, "the parked read was no completion operation"
      skip "the new pipe did not reuse the number" unless r2.fileno == fd
      assert_kind_of IOError, result, "the read of the closed IO answered #{result.inspect}"
      assert_equal "new", fresh, "the new pipe's bytes"
    ensure
      [w1, r2, w2].compact.each(&:close)
      selector&.close
    end
  end

  # More reads queued in one turn than the ring's submission queue holds
  # (256): queuing the 257th enters the kernel to make room, before the
  # loop checked the queued reads, so the driver withdraws them instead of
  # submitting them (-EAGAIN), and their fibers wait for readiness and read
  # plainly. Every reader gets its own bytes, and none spins (a subprocess
  # with a deadline: a loop that never ends shows as a timeout).
  def test_more_reads_queued_in_one_turn_than_the_ring_holds
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      n = 400
      pipes = Array.new(n) { IO.pipe }
      got = Array.new(n)
      queued = nil
      Farce.run(backend: :io_uring, turn_budget: nil) do # every reader parks before the loop polls
        pipes.each_with_index { |(r, _), i| Fiber.schedule { got[i] = r.readpartial(10) } }
        queued = Fiber.scheduler.stats[:completion_ops_submitted]
        pipes.each_with_index { |(_, w), i| w.write("p\#{i}") }
      end
      puts "queued \#{queued}"
      puts "wrong \#{got.each_with_index.reject { |g, i| g == "p\#{i}" }.size}"
    RUBY
    assert status.success?, out
    assert_includes out, "queued 400"
    assert_includes out, "wrong 0"
  end
end
