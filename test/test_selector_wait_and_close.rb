# frozen_string_literal: true

require_relative "test_helper"

# Two io_wait cases of io-event's own selector suite (test/io/event/selector.rb,
# 1.19.4) that Farce failed on some backends, checked here on whichever
# backend FARCE_BACKEND names (`rake test` runs each):
#
# - two fibers wait on one socket, one for WRITABLE (ready at once), one for
#   READABLE (ready once the peer wrote): a single select resumes both. On
#   io_uring the read wait was armed but not submitted by the poll that
#   handed out the ready writer, so it stayed unreported until a later select.
# - a fiber waits on an IO that another fiber closes before the loop's
#   select: the waiter must not be resumed with a readiness that was the dead
#   descriptor's (poll's POLLNVAL, io_uring's EBADF). io-event's EPoll never
#   resumes it (the close dropped its registration); Farce resumes it with
#   IOError, as URing's EBADF and farce's io_read do.
class TestSelectorWaitAndClose < Minitest::Test
  def setup
    skip_on_ruby_loop("has no io-event selector: the selector is the native core's only")
    @loop = Fiber.current
    @selector = Farce::IOEventSelector.new(@loop)
    @local, @remote = UNIXSocket.pair
  end

  def teardown
    @selector&.close
    [@local, @remote].each { |io| io&.close unless io&.closed? }
  end

  # A fiber that records what block returns (or raises), then gives the loop back.
  def waiter(log, name, &block)
    Fiber.new do
      log << [name, begin
        block.call
      rescue StandardError => e
        e.class
      end]
      @loop.transfer
    end
  end

  def test_one_select_resumes_a_reader_and_a_writer_of_one_socket
    3.times do |round|
      log = []
      reader = waiter(log, :read) { @selector.io_wait(reader, @local, IO::READABLE) }
      writer = waiter(log, :write) { @selector.io_wait(writer, @local, IO::WRITABLE) }
      reader.transfer
      writer.transfer
      @remote.write("x")
      @selector.select(1)
      assert_equal [[:read, IO::READABLE], [:write, IO::WRITABLE]], log.sort, "round #{round}: one select resumes both"
      @local.read_nonblock(1)
    end
  end

  def test_a_wait_on_an_io_another_fiber_closed_never_reports_readiness
    log = []
    reader = waiter(log, :read) { @selector.io_wait(reader, @local, IO::READABLE) }
    closer = waiter(log, :closed) { @local.close }
    reader.transfer
    closer.transfer
    3.times { @selector.select(0.06) } # past the close scan (50 ms) too
    assert_includes [[[:closed, nil]], [[:closed, nil], [:read, IOError]]], log,
                    "the waiter stays parked or raises IOError; it is never told the closed IO was ready"
  end
end
