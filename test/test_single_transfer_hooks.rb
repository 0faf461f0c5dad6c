# frozen_string_literal: true

require_relative "test_helper"
require "tempfile"

# Ruby 4.1's io_read/io_write/io_pread/io_pwrite (scheduler interface
# version 4, ruby/ruby#18483): (io, buffer, offset, length) and (io, buffer,
# from, offset, length), one transfer of at most `length` bytes that never
# waits for readiness (-EAGAIN instead; on io_uring, a fiber that can park
# waits for one completion operation of that range). No Ruby on this machine calls them yet (the
# 4.1-dev snapshot predates the change), so the tests call the hooks
# directly in 4.1's argument order: under their own names (__io_read_v4,
# ...), which every build defines, or as io_read itself on a Ruby whose
# headers say version 4 (Farce::SINGLE_TRANSFER_HOOKS). Both names are the
# same C function. Through both front ends: the selector's forms take the
# fiber first, as io-event's do.
class TestSingleTransferHooks < Minitest::Test
  EAGAIN = -Errno::EAGAIN::Errno
  EINVAL = -Errno::EINVAL::Errno

  def setup
    Warning[:experimental] = false # IO::Buffer's warning
  end

  # The version 4 hook `name` of the scheduler, called as Ruby 4.1 would.
  def hook(name, *arguments)
    scheduler = Fiber.scheduler
    return scheduler.public_send(name, *arguments) if Farce::SINGLE_TRANSFER_HOOKS

    scheduler.__send__(:"__#{name}_v4", *arguments)
  end

  # Runs the block in a blocking fiber, which never parks: there a transfer
  # that cannot be made now is -EAGAIN on every backend, io_uring included.
  def unparked(&block) = Fiber.new(blocking: true, &block).resume

  # Whether a transfer from a fiber that can park becomes a completion
  # operation once the descriptor is not ready (io_uring).
  def operations? = Fiber.scheduler.stats[:completion_ops]

  def test_read_moves_at_most_length_bytes_to_the_offset
    farce do
      r, w = IO.pipe
      buffer = IO::Buffer.new(8)
      w.write("abcdefgh")
      assert_equal 3, hook(:io_read, r, buffer, 2, 3)
      assert_equal "\0\0abc\0\0\0".b, buffer.get_string
      assert_equal "defgh", r.read_nonblock(16), "only `length` bytes were taken from the pipe"
    end
  end

  def test_short_read_returns_what_was_there
    farce do
      r, w = IO.pipe
      buffer = IO::Buffer.new(16)
      w.write("xy")
      assert_equal 2, hook(:io_read, r, buffer, 0, 16)
      assert_equal "xy", buffer.get_string(0, 2)
    end
  end

  # The hook never waits for readiness: Ruby's IO layer calls io_wait and
  # the hook again.
  def test_read_of_an_empty_stream_is_eagain_at_once
    farce do
      r, w = IO.pipe
      buffer = IO::Buffer.new(4)
      assert_equal EAGAIN, unparked { hook(:io_read, r, buffer, 0, 4) }
      assert_equal 0, Fiber.scheduler.stats[:pending_waits], "nothing parked, nothing left waiting"
      w.write("z")
      assert_equal 1, hook(:io_read, r, buffer, 0, 4)
    end
  end

  # From a fiber that can park: -EAGAIN, or on io_uring one completion
  # operation of exactly the range, which ends when data comes.
  def test_read_of_an_empty_stream_from_a_fiber_that_can_park
    result = :none
    operations = nil
    farce do
      r, w = IO.pipe
      buffer = IO::Buffer.new(8)
      operations = operations?
      reader = Fiber.schedule { result = hook(:io_read, r, buffer, 1, 3) }
      if operations
        assert reader.alive?, "parked on its operation"
        assert_equal :none, result
        assert buffer.locked?, "held while the kernel may write into it"
      end
      w.write("abcdef")
      sleep 0.001 while reader.alive? # the loop runs it once the data is there
      assert_equal(operations ? "def" : "abcdef", r.read_nonblock(16))
      assert_equal "\0abc".b, buffer.get_string(0, 4) if operations
      refute buffer.locked?
    end
    assert_equal(operations ? 3 : EAGAIN, result)
  end

  def test_end_of_file_is_zero
    farce do
      r, w = IO.pipe
      w.close
      assert_equal 0, hook(:io_read, r, IO::Buffer.new(4), 0, 4)
    end
  end

  # Length 0 asks for no transfer (it is not "read without waiting", as it
  # was before 4.1): nothing is read.
  def test_zero_length_moves_nothing
    farce do
      r, w = IO.pipe
      w.write("q")
      assert_equal 0, hook(:io_read, r, IO::Buffer.new(4), 0, 0)
      assert_equal 0, hook(:io_write, w, IO::Buffer.new(4), 0, 0)
      assert_equal "q", r.read_nonblock(4)
    end
  end

  def test_a_range_outside_the_buffer_is_einval
    farce do
      r, w = IO.pipe
      w.write("q")
      buffer = IO::Buffer.new(4)
      assert_equal EINVAL, hook(:io_read, r, buffer, 5, 0)
      assert_equal EINVAL, hook(:io_read, r, buffer, 2, 3)
      assert_equal EINVAL, hook(:io_write, w, buffer, 0, 5)
      assert_equal "q", r.read_nonblock(4)
    end
  end

  def test_write_moves_at_most_length_bytes_from_the_offset
    farce do
      r, w = IO.pipe
      buffer = IO::Buffer.for(+"0123456789") { |b| b.dup }
      assert_equal 4, hook(:io_write, w, buffer, 3, 4)
      assert_equal "3456", r.read_nonblock(16)
    end
  end

  def test_write_to_a_full_stream_is_eagain_at_once
    farce do
      _r, w = IO.pipe
      nil while w.write_nonblock("x" * 65_536, exception: false).is_a?(Integer)
      buffer = IO::Buffer.new(4)
      assert_equal EAGAIN, unparked { hook(:io_write, w, buffer, 0, 4) }
      assert_equal 0, Fiber.scheduler.stats[:pending_waits]
    end
  end

  def test_a_closed_io_raises
    farce do
      r, _w = IO.pipe
      r.close
      assert_raises(IOError) { hook(:io_read, r, IO::Buffer.new(4), 0, 4) }
    end
  end

  def test_positional_read_and_write_are_one_transfer_each
    skip_on_ruby_loop("runs io_pread/io_pwrite in the native extension's worker pool only") unless Farce::Native.loaded?
    Tempfile.create("farce") do |file|
      file.write("0123456789")
      file.flush
      farce do
        buffer = IO::Buffer.new(8)
        assert_equal 3, hook(:io_pread, file, buffer, 4, 1, 3)
        assert_equal "\0" + "456" + "\0" * 4, buffer.get_string
        assert_equal 2, hook(:io_pread, file, buffer, 8, 0, 8), "a short read at the end of the file"
        assert_equal 0, hook(:io_pread, file, buffer, 100, 0, 8), "end of file"
        assert_equal 0, hook(:io_pread, file, buffer, 0, 0, 0)
        assert_equal EINVAL, hook(:io_pread, file, buffer, -1, 0, 1)
        assert_equal EINVAL, hook(:io_pread, file, buffer, 0, 6, 3)
        buffer.set_string("AB", 0)
        assert_equal 2, hook(:io_pwrite, file, buffer, 1, 0, 2)
      end
      assert_equal "0AB3456789", File.read(file.path)
    end
  end

  # The buffer Ruby hands a hook must come back with the locks it had
  # (Ruby 4.1 ends the process otherwise): none for a buffer nobody locked,
  # and its owner's for one its owner locked.
  def test_the_buffer_comes_back_as_locked_as_it_went_in
    farce do
      r, w = IO.pipe
      buffer = IO::Buffer.new(4)
      w.write("ab")
      hook(:io_read, r, buffer, 0, 1)
      hook(:io_read, r, IO::Buffer.new(4), 0, 4) # -EAGAIN after 1 byte: a second way out
      hook(:io_write, w, buffer, 0, 1)
      refute buffer.locked?
      buffer.locked do
        assert_equal 1, hook(:io_read, r, buffer, 0, 4)
        assert_equal EAGAIN, unparked { hook(:io_read, r, buffer, 0, 4) }
        assert_equal 1, hook(:io_write, w, buffer, 0, 1)
        assert buffer.locked?, "the owner's lock is still the owner's"
      end
      refute buffer.locked?
      buffer.resize(8) # nobody holds it any more
    end
  end

  # The selector's forms: io-event's interface on Ruby 4.1 (io-event#211),
  # fiber first. The fiber may give the loop a turn (transfer to it) at any
  # hook, so the loop selects until it finished.
  def test_selector_forms
    skip "the selector is the native extension's" unless Farce::Native.loaded?
    skip_on_ruby_loop("has no selector")
    loop_fiber = Fiber.current
    selector = Farce::IOEventSelector.new(loop_fiber)
    call = lambda do |name, *arguments|
      next selector.public_send(name, Fiber.current, *arguments) if Farce::SINGLE_TRANSFER_HOOKS

      selector.__send__(:"__#{name}_v4", Fiber.current, *arguments)
    end
    run = lambda do |&block|
      done = false
      Fiber.new do
        block.call
        done = true
        loop_fiber.transfer
      end.transfer
      deadline = monotonic + 10
      selector.select(0.01) until done || monotonic > deadline
      assert done, "the selector's fiber finished"
    end
    r, w = IO.pipe
    results = nil
    # the loop's own fiber never parks (a child fiber would, on io_uring:
    # test/single_transfer_build_check.rb)
    first = call.(:io_read, r, IO::Buffer.new(4), 0, 4)
    run.call do
      buffer = IO::Buffer.new(8)
      results = [first]
      w.write("abcdef")
      results << call.(:io_read, r, buffer, 1, 2) << buffer.get_string(0, 3)
      buffer.set_string("XY", 0)
      results << call.(:io_write, w, buffer, 0, 2) << r.read_nonblock(16) << buffer.locked?
    end
    assert_equal [EAGAIN, 2, "\0ab".b, 2, "cdefXY", false], results
    Tempfile.create("farce") do |file|
      file.write("hello")
      file.flush
      run.call do
        buffer = IO::Buffer.new(4)
        results = [call.(:io_pread, file, buffer, 1, 0, 3), buffer.get_string(0, 3), call.(:io_pwrite, file, buffer, 0, 1, 1)]
      end
      assert_equal [3, "ell", 1], results
      assert_equal "lello", File.read(file.path)
    end
  ensure
    selector&.close
  end
end
