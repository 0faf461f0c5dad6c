# frozen_string_literal: true

require_relative "test_helper"

# The loop's wait paths under many interleavings (test/wait_stress_workload.rb,
# in a child process with a hard deadline), and the bugs that workload found,
# each pinned by a test of its own.
class TestWaitStress < Minitest::Test
  # read_nonblock and write_nonblock reach the io_read/io_write hooks with a
  # length of 0 (Ruby 3.1 to 3.4): they must answer -EAGAIN when nothing can
  # be done, not park the fiber until the descriptor is ready (forever, when
  # no data comes).
  def test_nonblocking_read_and_write_never_wait
    out, status = ruby_subprocess(<<~RUBY, timeout: 20) # a parked fiber: the child hangs
      require "farce"
      $stdout.sync = true
      Farce.run(backend: :#{backend}) do
        r, w = IO.pipe
        a, b = UNIXSocket.pair
        Fiber.schedule do
          w.write("abc")
          puts "pipe read: \#{r.read_nonblock(100, exception: false).inspect}"
          puts "pipe read empty: \#{r.read_nonblock(100, exception: false).inspect}"
          w.write_nonblock("x" * 65_536, exception: false) until w.write_nonblock("x", exception: false) == :wait_writable
          puts "pipe write full: \#{w.write_nonblock("y", exception: false).inspect}"
          puts "socket read empty: \#{a.read_nonblock(10, exception: false).inspect}"
          begin
            a.read_nonblock(10)
          rescue IO::WaitReadable
            puts "socket read raised WaitReadable"
          end
        end
      end
      puts "done"
      exit!(0)
    RUBY
    assert status.success?, out
    assert_includes out, 'pipe read: "abc"'
    assert_includes out, "pipe read empty: :wait_readable"
    assert_includes out, "pipe write full: :wait_writable"
    assert_includes out, "socket read empty: :wait_readable"
    assert_includes out, "socket read raised WaitReadable"
    assert_includes out, "done"
  end
end
