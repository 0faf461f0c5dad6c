# frozen_string_literal: true

require_relative "test_helper"

# Enumerator#next runs the enumeration in a fiber of its own, which the
# fiber calling #next resumes: non-blocking, so the scheduler's hooks run in
# it, but not resumed by the loop. A wait there must not park by yielding
# (the yield would land in #next, which returned nil for a character not
# read yet; the loop later resumed the enumerator's fiber on its own, and
# its read then raised IOError on the closed socket): it waits with the
# thread, as a blocking fiber does. Ruby's TestFiberEnumerator
# #test_read_characters, and the case where the bytes come later from
# another thread. (docs/contracts.md: a fiber resumed inside another
# fiber's turn.)
class TestEnumeratorNextInAFiber < Minitest::Test
  def run_thread(&block)
    error = nil
    Thread.new do
      Fiber.set_scheduler(Farce::Scheduler.new(backend: backend))
      block.call
    rescue Exception => e # rubocop:disable Lint/RescueException
      error = e
    end.join(30) or flunk "hung"
    raise error if error
  end

  # Ruby's test_read_characters (test/fiber/test_enumerator.rb), as written there.
  def test_each_char_through_next_reads_a_socket_the_writer_closed
    i, o = UNIXSocket.pair
    message = String.new
    run_thread do
      e = i.to_enum(:each_char)
      Fiber.schedule do
        o.write("Hello World")
        o.close
      end
      Fiber.schedule do
        begin
          while (c = e.next)
            message << c
          end
        rescue StopIteration
          # the end
        end
        i.close
      end
    end
    assert_equal "Hello World", message
    assert_predicate i, :closed?
  ensure
    [i, o].each { |io| io&.close unless io&.closed? }
  end

  # The bytes arrive later, from another thread: #next waits for them
  # (the thread waits), and returns each character, never a nil before the end.
  def test_next_waits_for_bytes_another_thread_writes_later
    i, o = UNIXSocket.pair
    chars = []
    writer = Thread.new do
      sleep 0.05
      o.write("ab")
      sleep 0.05
      o.write("c")
      o.close
    end
    run_thread do
      e = i.to_enum(:each_char)
      Fiber.schedule do
        loop { chars << e.next }
      end
    end
    writer.join
    assert_equal %w[a b c], chars
  ensure
    [i, o].each { |io| io&.close unless io&.closed? }
  end

  # A fiber the application resumes itself inside a scheduled fiber sleeps
  # with the thread too, and its resumer gets its real result.
  def test_a_fiber_resumed_inside_a_scheduled_fiber_sleeps_and_returns_its_value
    result = nil
    run_thread do
      Fiber.schedule do
        inner = Fiber.new(blocking: false) do
          sleep 0.01
          :inner_done
        end
        result = inner.resume
      end
    end
    assert_equal :inner_done, result
  end
end
