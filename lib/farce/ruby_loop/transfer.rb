# frozen_string_literal: true

module Farce
  class RubyLoop
    # io_read/io_write, and the system calls the loop makes outside its own hooks: the transfer
    # loop, ready_now's IO.select, and the blocking fiber they run in.

    # io_read/io_write: at least `length` bytes between buffer[offset...] and
    # the IO (one successful transfer when length is 0); the count, or
    # -errno when nothing moved. The system call runs in a blocking fiber:
    # IO's non-blocking methods called from a non-blocking fiber would call
    # these very hooks again.
    def io_read(io, buffer, length, offset = 0)
      transfer(io, buffer, length, offset, reading: true)
    end

    def io_write(io, buffer, length, offset = 0)
      transfer(io, buffer, length, offset, reading: false)
    end

    # Ruby 4.1's io_read/io_write (SINGLE_TRANSFER): one transfer of at most
    # `length` bytes of buffer[offset, length]; the count (0 at end of file,
    # and for a length of 0 without any call) or -errno, -EAGAIN when the IO
    # is not ready: it never waits (Ruby's IO layer does).
    def io_read_once(io, buffer, offset, length)
      transfer_once(io, buffer, offset, length, reading: true)
    end

    def io_write_once(io, buffer, offset, length)
      transfer_once(io, buffer, offset, length, reading: false)
    end

    private

    # What both transfers check first; the IO and the two integers.
    def transfer_arguments(io, buffer, length, offset)
      usable!
      io = to_io(io)
      turn_check(io)
      raise TypeError, "wrong argument type #{buffer.class} (expected IO::Buffer)" unless buffer.is_a?(IO::Buffer)

      [io, integer(length), integer(offset)]
    end

    def transfer(io, buffer, length, offset, reading:)
      io, length, offset = transfer_arguments(io, buffer, length, offset)
      return file_transfer(io, buffer, length, offset, reading: reading) if regular_file?(io) && file_steps?

      writer = raw_writer(io) unless reading
      total = 0
      loop do
        size = buffer.size
        # As the C hooks convert them (to size_t): out of range is a RangeError,
        # a negative number a huge one, and a length or offset beyond the
        # buffer -EINVAL (io-event's selectors' answer, the native front ends')
        [length, offset].each do |n|
          raise RangeError, "integer #{n} too big to convert to size_t" if n >= 1 << 64 || n < -(1 << 63)
        end
        if length.negative? || offset.negative? || offset > size || length > size - offset
          return -Errno::EINVAL::Errno
        end
        room = size - offset - total
        return total if room.zero?

        result = begin
          blocking { step(io, writer, buffer, offset + total, room, reading) }
        rescue Errno::EINTR
          next
        rescue SystemCallError => e
          return total.positive? ? total : -e.errno
        end
        case result
        when :wait_readable, :wait_writable
          # length 0 is read_nonblock/write_nonblock: never wait (io-event's answer)
          return total.positive? ? total : -Errno::EAGAIN::Errno if length.zero?

          io_wait(io, reading ? IO::READABLE : IO::WRITABLE, nil)
        when nil # end of file
          return total
        when String
          buffer.set_string(result, offset + total)
          total += result.bytesize
          return total if total >= length
        else
          total += result
          return total if total >= length
        end
      end
    end

    # One read (a String, nil at end of file) or write (the count) of at
    # most room bytes at buffer[at...] that never blocks the thread, or
    # :wait_readable/:wait_writable; runs in the blocking fiber.
    #
    # It leaves the descriptor's O_NONBLOCK as it finds it. That flag belongs
    # to the open file, which other processes share (a pipeline's pipe, a
    # terminal): read_nonblock and write_nonblock set it and never clear it,
    # so after `app | head` wrote to $stdout through this loop, head's own
    # writes to the pipe failed with EAGAIN. Where the flag is set (Ruby sets
    # it on the pipes and sockets it makes; the program may have), they are
    # used as they are, and set nothing. Where it is clear, nothing here sets
    # it, not even for a moment (a process sharing the file would see that
    # moment), and the system call waits for no one: a read only once
    # IO.select says there are bytes (it returns those), a write only once
    # there is room, and then at most what room guarantees to take at once
    # (BLOCKING_WRITE_MAX). The native loop needs neither: it reads and
    # writes with MSG_DONTWAIT and RWF_NOWAIT (io_transfer.c), which pure
    # Ruby cannot ask for. What remains are two races with another process
    # sharing the file: one that takes the bytes or the room between the
    # IO.select and the call leaves this thread waiting in it until more
    # come (as Ruby without a scheduler would wait), and one that clears the
    # flag between descriptor_blocking? and read_nonblock's own look at it
    # gets it set again.
    def step(io, writer, buffer, at, room, reading)
      if dontwait_socket?(reading ? io : writer) || !descriptor_blocking?(io)
        return reading ? io.read_nonblock(room, exception: false) : writer.write_nonblock(buffer.get_string(at, room), exception: false)
      end

      if reading
        return :wait_readable unless IO.select([io], nil, nil, 0)

        begin
          io.readpartial(room)
        rescue EOFError
          nil
        end
      else
        return :wait_writable unless IO.select(nil, [writer], nil, 0)

        room = BLOCKING_WRITE_MAX if room > BLOCKING_WRITE_MAX && !regular_file?(io)
        writer.syswrite(buffer.get_string(at, room))
      end
    end

    # What a blocking write may hand the kernel once the descriptor is
    # writable without waiting for more room: a pipe is writable on Linux
    # when a page is free, elsewhere when PIPE_BUF is (512 bytes, POSIX's
    # least). A regular file is always writable and takes any size.
    BLOCKING_WRITE_MAX = RUBY_PLATFORM.include?("linux") ? 4096 : 512

    # Whether io is a socket whose read_nonblock and write_nonblock pass
    # MSG_DONTWAIT to recv and send and never look at O_NONBLOCK (Ruby's
    # socket library does so where MSG_DONTWAIT is reliable: Linux). No
    # fcntl then, and nothing to leave as it was.
    def dontwait_socket?(io)
      defined?(::BasicSocket) && io.is_a?(::BasicSocket) && ::BasicSocket.private_method_defined?(:__read_nonblock) ? true : false
    end

    # Whether io's descriptor has O_NONBLOCK clear now. Asked at every step:
    # another process sharing the open file, or `io.nonblock =`, may change
    # it at any time: one fcntl(2) per read or write of anything but a
    # socket (read_nonblock makes one more itself). Windows has no F_GETFL
    # (a pipe's non-blocking mode is its handle's): there,
    # read_nonblock/write_nonblock as before. (IO#fcntl, not io/nonblock's
    # IO#nonblock?, which asks the same: Ruby 3.1's io/nonblock is not
    # declared Ractor-safe, and a Ractor other than the main one may not call it.)
    def descriptor_blocking?(io)
      FLAGS_KNOWN && (io.fcntl(Fcntl::F_GETFL) & Fcntl::O_NONBLOCK).zero?
    end

    # RUBY_PLATFORM, not Gem.win_platform?: a program run with
    # --disable-gems (Ruby's own test harness runs its children so) has no Gem.
    FLAGS_KNOWN = !RUBY_PLATFORM.match?(/mswin|mingw|cygwin/)

    # Whether io is a regular file: always "ready", so read_nonblock would
    # hold the loop for as long as the disk takes. Only a File can be one
    # (sockets and pipes are other classes; a File may be a FIFO).
    def regular_file?(io)
      io.is_a?(File) && io.stat.file?
    rescue SystemCallError, IOError
      false
    end

    # Whether the extension is loaded, which has the two calls a file step
    # makes (Farce.__file_nowait, __file_transfer_once): an installation
    # without the native core reads and writes files as any other IO, on the
    # loop's thread, as it did before files left the loop.
    def file_steps?
      Farce.respond_to?(:__file_nowait)
    end

    # transfer on a regular file, as the native loop does it
    # (ext/farce/hook_io/io_transfer.c, file_step): each step is one preadv2 or
    # pwritev2 with RWF_NOWAIT, which the page cache answers at once, and
    # when it would wait for the disk, one read or write on the scheduler's
    # worker pool (the fiber parks meanwhile).
    def file_transfer(io, buffer, length, offset, reading:)
      total = 0
      loop do
        size = buffer.size
        return -Errno::EINVAL::Errno if length.negative? || offset.negative? || offset > size || length > size - offset

        room = size - offset - total
        return total if room.zero?

        writing = !reading
        result = Farce.__file_nowait(writing, io, buffer, -1, offset + total, room)
        if result == -Errno::EAGAIN::Errno && !(parkable? && @file_offloader)
          # a fiber that cannot park (resumed inside another's turn, by
          # Fiber#raise for one) reads right here, as Ruby does without a
          # scheduler: -EAGAIN would send Ruby to io_wait, which a file
          # answers at once, and back here, forever
          result = Farce.__file_transfer_once(writing, io, buffer, -1, offset + total, room)
        elsif result == -Errno::EAGAIN::Errno
          @file_transfers_offloaded += 1
          moved = []
          begin
            result = @file_offloader.call(writing, io, buffer, -1, offset + total, room, moved)
          rescue Exception # rubocop:disable Lint/RescueException -- re-raised: the read's bytes go back first
            # The worker read them at the file position: the IO's next read
            # returns them first (as the native loop's keep_unread).
            got = moved[0]
            io.ungetbyte(buffer.get_string(offset, total + got)) if reading && got.is_a?(Integer) && got.positive? && !io.closed?
            raise
          end
        elsif result >= 0
          @file_transfers_cached += 1
        end
        return total.positive? ? total : result if result.negative? && result != -Errno::EINTR::Errno
        next if result.negative?
        return total if result.zero? && reading # end of file

        total += result
        return total if total >= length
      end
    end

    # io_read_once/io_write_once's one transfer (see there).
    def transfer_once(io, buffer, offset, length, reading:)
      io, length, offset = transfer_arguments(io, buffer, length, offset)
      [length, offset].each do |n|
        raise RangeError, "integer #{n} too big to convert to size_t" if n >= 1 << 64 || n < -(1 << 63)
      end
      size = buffer.size
      return -Errno::EINVAL::Errno if length.negative? || offset.negative? || offset > size || length > size - offset
      return 0 if length.zero?

      writer = raw_writer(io) unless reading # see raw_writer: 4.0's flush through io_write
      loop do
        result = begin
          blocking { step(io, writer, buffer, offset, length, reading) }
        rescue Errno::EINTR
          next
        rescue SystemCallError => e
          return -e.errno
        end
        case result
        when :wait_readable, :wait_writable then return -Errno::EAGAIN::Errno
        when nil then return 0 # end of file
        when String
          buffer.set_string(result, offset)
          return result.bytesize
        else return result
        end
      end
    end

    # The IO io_write writes through: one with no write buffer of its own on
    # io's descriptor (kept per descriptor number; it never closes it); a
    # Socket for a socket, whose write_nonblock sends with MSG_DONTWAIT
    # (dontwait_socket?), where a plain IO's would set O_NONBLOCK.
    # Ruby 4.0 flushes an IO's write buffer through the io_write hook, in the
    # writing fiber, holding the IO's write lock (a Mutex) and with the bytes
    # still counted as buffered. io.write_nonblock would flush that buffer
    # first: from the syscall fiber it takes the lock another fiber holds
    # ("deadlock; lock already owned by another fiber belonging to the same
    # thread"), and without the lock it would write the bytes twice. Up to
    # 3.4 the hook only ever saw an IO whose buffer was empty.
    def raw_writer(io)
      fd = io.fileno
      socket = dontwait_socket?(io)
      writer = @raw_writers[fd]
      return writer if writer && dontwait_socket?(writer) == socket # (the number may name another kind of file now)

      writer = socket ? ::Socket.for_fd(fd).tap { |s| s.autoclose = false } : IO.for_fd(fd, "wb", autoclose: false)
      writer.sync = true
      @raw_writers[fd] = writer
    end

    def ready_now(io, events, duration = 0)
      readers = (events & IO::READABLE) != 0 ? [io] : nil
      writers = (events & IO::WRITABLE) != 0 ? [io] : nil
      priority = (events & IO::PRIORITY) != 0 ? [io] : nil
      ready = blocking { IO.select(readers, writers, priority, duration) }
      return 0 unless ready

      got = 0
      got |= IO::READABLE unless ready[0].empty?
      got |= IO::WRITABLE unless ready[1].empty?
      got |= IO::PRIORITY unless ready[2].empty?
      got
    end

    # Runs the block (a resume of fiber by the loop or Fiber.schedule) as
    # fiber's turn: see parkable?. With stall detection on, notes whether the
    # turn passed the threshold while fiber ran (stall_crossed).
    def in_turn(fiber)
      previous = @turn_owner
      @turn_owner = fiber
      entered = monotonic if @stall_threshold && @turn_active
      yield
    ensure
      @turn_owner = previous
      drop_held_raise if @held_fiber.equal?(fiber)
      stall_crossed(fiber, entered) if entered
    end

    # Whether the current fiber can park: it yields, which returns to whoever
    # resumed it, so only the fiber whose turn it is (or any, outside the
    # loop's turns) gets back to the loop that way. Another non-blocking
    # fiber was resumed inside that turn (Enumerator#next's fiber, a
    # Fiber.new resumed by the application): it waits with the thread, as a
    # blocking fiber does (the native loop's can_park, fiber_scheduler.c).
    def parkable?
      return false if Fiber.blocking?

      owner = @turn_owner
      owner.nil? || owner.equal?(Fiber.current) || !owner.alive?
    end

    # Runs the block in a blocking fiber: there, IO methods do their system
    # calls themselves instead of calling this scheduler's hooks. One such
    # fiber is kept per thread and reused (a new fiber per call costs ~30x
    # more: 3.7 us against 0.13 us on Ruby 3.1).
    def blocking(&block)
      return yield if Fiber.blocking?

      fiber = @syscall_fiber
      fiber = @syscall_fiber = syscall_fiber unless fiber&.alive? && @syscall_thread == Thread.current
      value, error = fiber.resume(block)
      raise error if error

      value
    end

    def syscall_fiber
      @syscall_thread = Thread.current
      Fiber.new(blocking: true) do |job|
        loop do
          outcome = begin
            [job.call, nil]
          rescue Exception => e # rubocop:disable Lint/RescueException -- raised again in the caller's fiber
            [nil, e]
          end
          job = Fiber.yield(outcome)
        end
      end
    end
  end
end
