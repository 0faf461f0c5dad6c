# frozen_string_literal: true

module Farce
  class RubyLoop
    # The scheduler hooks that wait (io_wait, kernel_sleep, block, unblock, yield, fiber_interrupt,
    # io_close) and select_ready for io_select.

    def io_wait(io, events, timeout)
      usable!
      io = to_io(io)
      events = integer(events)
      if events <= 0 || (events & ~EVENTS) != 0
        raise ArgumentError, "io_wait: invalid events #{events} (use IO::READABLE, IO::PRIORITY, IO::WRITABLE)"
      end

      duration = interval(timeout)
      raise IOError, "closed stream" if io.closed?

      if duration == 0 || !parkable? # a fiber that cannot park (nobody would resume it): the thread waits
        got = ready_now(io, events, duration)
        return got.zero? ? false : got
      end
      fd = io.fileno
      # (reopens inlined: this is every wait's path)
      claim_descriptor(io, fd) unless @fd_owners[fd].equal?(io) &&
                                      @fd_reopens[fd] == (@main_ractor ? RubyLoop.reopens : RubyLoop.reopens_here)
      wait = Wait.new(Fiber.current, io: io, events: events)
      (@io_waits[io] ||= []) << wait
      result = park(wait, duration)
      raise IOError, "closed stream (descriptor #{fd} was closed, or now names another open file)" if result == :closed

      result.is_a?(Integer) && result.positive? ? result : false
    end

    # kernel_sleep(duration = nil): Mutex#sleep and ConditionVariable#wait
    # come here and are woken by unblock.
    def kernel_sleep(*arguments)
      usable!
      raise ArgumentError, "wrong number of arguments (given #{arguments.size}, expected 0..1)" if arguments.size > 1

      duration = arguments.empty? ? nil : interval(arguments[0])
      unless parkable? # called by hand from a fiber that cannot park: the thread sleeps, as without a scheduler
        blocking { duration ? sleep(duration) : sleep }
        return true
      end
      wait = Wait.new(Fiber.current, unblockable: true)
      park(wait, duration)
      true
    end

    def block(blocker, timeout = nil)
      usable!
      # converted once: a Numeric's own to_f is Ruby code (see the native block)
      timeout = timeout.to_f if timeout.is_a?(Numeric)
      # a negative timeout times out at once, as without a scheduler
      return @early_unblocks.delete(Fiber.current) ? true : false if timeout.is_a?(Float) && timeout.negative?

      duration = interval(timeout)
      park(Wait.new(Fiber.current, unblockable: true), duration) != :timed_out
    end

    # Safe from any thread: another thread hands the wakeup to the loop
    # through the inbox and wakes its IO.select. It never decides on its own
    # that the fiber is not blocked: it may lose the GVL at any call here, and
    # the fiber may register its wait meanwhile (Thread#join, Queue and
    # Mutex list it as waiting before they call `block`); a wakeup it noted
    # as early then would come after the fiber's look for one, and be lost.
    # A fiber it finds no wait for goes to the inbox as it is, and the loop's
    # thread settles it (unblocked): its wait if it has parked by then, else
    # an early unblock. (test/test_unblock_before_block.rb)
    def unblock(_blocker, fiber)
      return nil if closed?
      return unblocked(fiber) if Thread.current == @thread

      wait = @waits[fiber]
      if wait&.unblockable
        @inbox << wait
      elsif wait.nil? && fiber.is_a?(Fiber) && fiber.alive?
        @inbox << fiber
      else
        return nil
      end
      wake
      nil
    end

    def yield
      usable!
      park(Wait.new(Fiber.current), 0)
      nil
    end

    # fiber: a Fiber, or what Ruby 4.1 passes in its place (ruby/ruby#18793),
    # an object standing for one blocking operation that answers alive? (the
    # operation is still going on), raise (into its fiber) and transfer.
    def fiber_interrupt(fiber, exception)
      unless fiber.is_a?(Fiber) || INTERRUPT_TARGET.all? { |name| fiber.respond_to?(name) }
        raise TypeError, "fiber_interrupt: #{fiber.class} is not a Fiber, nor answers alive?, raise and transfer"
      end
      return nil if closed?
      raise exception if fiber.equal?(Fiber.current)
      return nil unless fiber.alive?

      @interrupts << [fiber, exception]
      wake unless Thread.current == @thread
      nil
    end

    # The IO#reopen calls this loop can know of: the main Ractor's (a
    # module's variable, as cheap as a method call), plus, in another
    # Ractor, that Ractor's own (RubyLoop.reopens_here).
    def reopens
      @main_ractor ? RubyLoop.reopens : RubyLoop.reopens_here
    end

    # Another IO object waits on fd than the last one (or an IO#reopen
    # happened since): when the number names another open file by now
    # (closed or dup2'd over behind the old IO's back, by C code, or
    # reopened), the fibers parked on the old file wake with IOError instead
    # of taking the new file's readiness, which IO.select reports for every
    # IO of that number. One stat, only then (the native loop's rule,
    # fd_table.c).
    def claim_descriptor(io, fd)
      @fd_reopens[fd] = reopens
      file = file_identity(io)
      if @fd_files.key?(fd) && @fd_files[fd] != file
        @io_waits.keys.each { |other| wake_io(other, :closed) if descriptor_of(other) == fd }
      end
      @fd_owners[fd] = io
      @fd_files[fd] = file
    end

    # The inode and access mode (a pipe's ends share the inode); nil when
    # the descriptor cannot be asked. Windows has no F_GETFL, and only a
    # regular file's inode holds still there: a pipe's or a socket's stat
    # gives a new one each time (seen under wine), which made a turn inside
    # a pipe read raise IOError for a file that never changed. There a
    # regular file is told by its inode and anything else by its kind alone,
    # as the native loop, which tracks no identity on Windows, tells none.
    ACCESS_MODE = defined?(Fcntl::F_GETFL) && defined?(Fcntl::O_ACCMODE)
    private_constant :ACCESS_MODE

    def file_identity(io)
      st = io.stat
      return [st.dev, st.ino, io.fcntl(Fcntl::F_GETFL) & Fcntl::O_ACCMODE] if ACCESS_MODE

      st.file? ? [st.dev, st.ino] : [st.ftype]
    rescue SystemCallError, IOError, NotImplementedError
      nil
    end

    # Ruby 4.0 calls this before it closes a descriptor: its waiters raise
    # IOError at once. Another thread's close is left to the close scan.
    def io_close(target)
      return nil if closed? || Thread.current != @thread

      ios = if target.is_a?(Integer)
              @io_waits.keys.select { |io| descriptor_of(io) == target }
            else
              [to_io(target)]
            end
      ios.each { |io| wake_io(io, :closed) }
      nil
    end

    # For io_select: what is ready this instant (IO.select counts Ruby's
    # buffered input as readable). Never parks.
    def select_ready(io, events)
      io = to_io(io)
      raise IOError, "closed stream" if io.closed?

      ready_now(io, integer(events))
    end

    private

    # io's descriptor number, or nil once it is closed. Not `closed?` then
    # `fileno`: another thread's IO#close can run between the two (the GVL
    # may pass at the branch), and fileno would raise IOError in the fiber
    # that asked about some other IO.
    def descriptor_of(io)
      io.fileno
    rescue IOError
      nil
    end

    # unblock on the loop's thread, and each fiber another thread's unblock
    # put in the inbox: its unblockable wait becomes ready; with none, its
    # next unblockable park ends at once (see @early_unblocks). A fiber from
    # the inbox that is in another kind of wait meanwhile still gets the
    # early unblock: its unblocker found it in none, so the block it was
    # meant for is still to come (a spurious wakeup at worst).
    def unblocked(fiber, from_inbox: false)
      wait = @waits[fiber]
      if wait&.unblockable
        make_ready(wait, :woken)
      elsif (wait.nil? || from_inbox) && fiber.is_a?(Fiber) && fiber.alive?
        @early_unblocks.delete_if { |f, _| !f.alive? } if @early_unblocks.size >= 1024 # fibers that finished
        @early_unblocks[fiber] = true
      end
      nil
    end
  end
end
