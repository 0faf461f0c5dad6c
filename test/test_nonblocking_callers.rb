# frozen_string_literal: true

require_relative "test_helper"

# Ruby passes a length of 0 to io_read/io_write for read_nonblock and for a
# blocking read alike; the hook tells them apart by the method that called it
# (io_transfer.c: the caller's frame when it is a C method, a deeper search
# when Ruby code sits between). Ruby code between is a subclass's io_read
# calling super here (Async's scheduler in the peer suites): read_nonblock
# must still answer at once, and a blocking read must still wait for data.
class TestNonblockingCallers < Minitest::Test
  include FarceTestHelper

  def test_read_nonblock_through_a_ruby_io_read_answers_at_once
    skip_on_ruby_loop("routes io_read in Ruby: no frame search")
    out, status = ruby_subprocess(<<~RUBY, timeout: 20) # a parked fiber: the child hangs
      require "farce"
      $stdout.sync = true
      class Wrapped < Farce::Scheduler
        def io_read(*args)
          super
        end

        def io_write(*args)
          super
        end
      end
      Fiber.set_scheduler(Wrapped.new(backend: :#{backend}))
      r, w = IO.pipe
      Fiber.schedule do
        puts "nonblock: \#{r.read_nonblock(10, exception: false).inspect}"
        w.write_nonblock("x" * 65_536, exception: false) until w.write_nonblock("x", exception: false) == :wait_writable
        puts "write full: \#{w.write_nonblock("y", exception: false).inspect}"
      end
      Fiber.schedule do
        a, b = IO.pipe
        Fiber.schedule { sleep 0.05; b.write("late") }
        puts "blocking: \#{a.read(4).inspect}"
      end
      Fiber.scheduler.run
      puts "done"
      exit!(0)
    RUBY
    assert status.success?, out
    assert_includes out, "nonblock: :wait_readable"
    assert_includes out, "write full: :wait_writable"
    assert_includes out, 'blocking: "late"'
    assert_includes out, "done"
  end
end
