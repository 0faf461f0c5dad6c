# frozen_string_literal: true

require "socket"
require_relative "worker_pool"
require_relative "select"
require_relative "ruby_loop"
require_relative "ruby_loop/hooks"
require_relative "stall"
require_relative "unwind"
require_relative "timeout_duration"
require_relative "held_alarms"

module Farce
  # A Fiber::Scheduler over farce's Go core. The hooks Ruby calls most
  # (io_wait, io_read, io_write, kernel_sleep, block, unblock, run) are
  # implemented in C (ext/farce/front_ends/fiber_scheduler.c over the loop shared
  # with the io-event selector); the rarely called ones live here.
  # All of them are public methods that a subclass may override and `super`.
  # Without the native core, the same methods run on farce's pure-Ruby loop
  # (lib/farce/ruby_loop.rb); `backend` is then :ruby.
  class Scheduler
    include StallReporting
    include Unwinding

    # The default for backend: (Farce.backend_from_environment).
    FROM_ENVIRONMENT = Object.new.freeze
    private_constant :FROM_ENVIRONMENT

    # How long (seconds) a fiber may hold the loop before the next hook that
    # would not block (Fiber.schedule, a read or write that finds data, an
    # io_wait on a ready descriptor) gives the loop a turn first: measured
    # in bench/README.md (spawn and accept bursts). The C core keeps the
    # same figure (FARCE_DEFAULT_TURN_BUDGET_NS).
    DEFAULT_TURN_BUDGET = 0.0005

    # backend: :auto picks the best available driver (see #fallback_reason),
    # or name one of Farce.backends (what this system's core offers), or :ruby
    # (the pure-Ruby loop). Farce.backend_from_environment (FARCE_BACKEND, else
    # :auto) is the default.
    #
    # worker_threads, worker_queue: size of the pool of Ruby threads that
    # runs blocking operations (Ruby 3.4's blocking_operation_wait) and
    # pread/pwrite off the loop's thread, and how many jobs may wait for a
    # free thread. Threads start on first use.
    #
    # turn_budget: seconds a fiber may run without blocking before the loop
    # gets a turn (timers fire, ready fibers run) at its next hook that would
    # not block; nil turns it off (a fiber then holds the loop until it blocks).
    #
    # stall_threshold, on_stall: when one fiber runs longer than
    # stall_threshold seconds without giving the loop back, on_stall gets a
    # Farce::StallReport (fiber, duration, backtrace where it was stuck) when
    # it does (default: one line on $stderr). Off unless given or set by
    # FARCE_STALL_MS (milliseconds). See lib/farce/stall.rb.
    def initialize(backend: FROM_ENVIRONMENT,
                   worker_threads: WorkerPool::DEFAULT_SIZE, worker_queue: WorkerPool::DEFAULT_QUEUE_SIZE,
                   turn_budget: DEFAULT_TURN_BUDGET, stall_threshold: Farce.stall_threshold_from_environment,
                   on_stall: nil)
      explicit = !backend.equal?(FROM_ENVIRONMENT)
      name = if !explicit then Farce.backend_from_environment
             elsif backend.is_a?(Symbol) || backend.is_a?(String) then backend.to_sym
             else raise ArgumentError, "farce backend must be a Symbol or String, not #{backend.inspect}"
             end

      turn_budget = Scheduler.duration_option(:turn_budget, turn_budget)
      stall_threshold = Scheduler.duration_option(:stall_threshold, stall_threshold)
      self.on_stall = on_stall
      @held_alarms = HeldAlarms.for_this_ractor
      @worker_pool = WorkerPool.new(size: worker_threads, queue_size: worker_queue)
      open_core(name, explicit: explicit)
      self.__turn_budget = turn_budget
      self.__stall_threshold = stall_threshold if stall_threshold
    end

    # nil, or a Numeric >= 0 as a Float (0 means nil); else ArgumentError.
    def self.duration_option(name, value)
      return nil if value.nil?
      unless value.is_a?(Numeric) && !(value.is_a?(Float) && value.nan?) && value >= 0
        raise ArgumentError, "#{name} must be nil or seconds >= 0, not #{value.inspect}"
      end

      value.zero? ? nil : value.to_f
    end

    # The pool of worker threads (see WorkerPool).
    attr_reader :worker_pool

    # The native core when it loads, else the Ruby loop (see Native.fallback_reason).
    private def open_core(name, explicit:)
      reason = Native.fallback_reason(name, explicit: explicit)
      unless reason
        begin
          return __open(name.to_s) # an unknown name is an ArgumentError naming the choices
        rescue Farce::Error => e
          reason = Native.fallback_reason_after(name, e) || raise
        end
      end
      RubyLoop.install
      @ruby_loop = RubyLoop.new(reason)
      @ruby_loop.file_offloader = method(:__offload_file)
      nil
    end

    # Fiber.schedule: starts a non-blocking fiber at once; returns it when it
    # first blocks (or finishes).
    def fiber(*arguments, &block)
      raise ArgumentError, "Fiber.schedule needs a block" unless block

      fiber = Fiber.new(blocking: false) do
        block.call(*arguments)
      rescue Unwind
        nil # its scheduler unwound it (Unwinding): it ends here
      ensure
        __fiber_finished
      end
      __turn_check # a spawner that never blocks must not hold the loop
      __fiber_started
      __start(fiber) # fiber.resume, as the new fiber's turn (see the C __start)
      fiber
    end

    # Timeout.timeout: raises exception_class in the current fiber unless the
    # block finishes within duration seconds. The loop raises it at the
    # fiber's wait; when the fiber holds the thread past the deadline in a
    # wait the scheduler is not asked about, HeldAlarms raises it there, as
    # Timeout does without a scheduler. A duration Timeout cannot wait for
    # gets what Timeout gives it without a scheduler (TimeoutDuration).
    def timeout_after(duration, exception_class, *exception_arguments)
      seconds = TimeoutDuration.seconds(duration)
      return yield duration unless seconds

      token = __alarm(Fiber.current, seconds, exception_class, exception_arguments)
      begin
        @held_alarms.watch(self, seconds)
        yield duration
      ensure
        __cancel_alarm(token)
      end
    end

    # Process.wait and friends. A pidfd (Linux 5.3+) makes the child's exit a
    # readable descriptor the loop waits on (ext/farce/hook_io/process_wait_unix.c, shared
    # with the io-event selector); elsewhere, and for "any child" waits
    # (pid <= 0), a helper thread does the blocking waitpid.
    def process_wait(pid, flags)
      loop do
        status = __process_wait(pid, flags)
        return Thread.new { Process::Status.wait(pid, flags) }.value if status == :thread
        return status unless status == false # false: resumed by hand, wait again
      end
    end

    # Resolv for Socket, TCPSocket.new, Addrinfo: the system resolver runs
    # in a helper thread so that other fibers keep running.
    def address_resolve(hostname)
      host = hostname.sub(/%.*\z/, "") # strip an IPv6 zone: getaddrinfo takes the bare address
      Thread.new do
        Addrinfo.getaddrinfo(host, nil, nil, :STREAM).map(&:ip_address).uniq
      rescue SocketError
        []
      end.value
    end

    # Ruby 3.4+: a C function that would block the thread (zlib, open(2),
    # ...) runs on a worker thread while other fibers keep running. The
    # operation always runs; its value is returned, its exception raised.
    #
    # IO#close is the exception: it runs right here, as it does without a
    # scheduler. Ruby 3.4 sends the close(2) of every writable IO (every
    # socket) through this hook, and a worker's round trip costs 40-100 us
    # against the close's few: a server whose 1,000 clients hang up at once
    # queued the closes behind 4 workers for 100-400 ms, and the requests
    # of the live connections waited with them (bench/README.md, HTTP at
    # 1,000 connections). Fiber.blocking makes Ruby run the call itself
    # (with the GVL released) instead of coming back to this hook.
    def blocking_operation_wait(work)
      return work.call if closed? || Fiber.blocking?
      return Fiber.blocking { work.call } if inline_operation?

      offload(work)
    end

    # The C methods whose blocking operation runs on the loop's thread (see
    # blocking_operation_wait): close(2) of a socket or pipe does not wait.
    # (Of a file on NFS it may flush; Ruby without a scheduler, and Async
    # by default, wait for it the same way.)
    INLINE_OPERATIONS = %w[IO#close].freeze

    # Whether the C method that called blocking_operation_wait (the first
    # frame above this hook and its overrides) is one of INLINE_OPERATIONS.
    private def inline_operation?
      return false unless Thread.respond_to?(:each_caller_location) # Ruby < 3.2 calls the hook only by hand

      Thread.each_caller_location do |location|
        label = location.label
        next if label.end_with?("blocking_operation_wait", "inline_operation?")

        return INLINE_OPERATIONS.include?(label)
      end
      false
    end

    # io_pread and io_pwrite (Ruby 3.3+) are C methods (ext/farce/hook_io/positional_io.c):
    # Ruby 3.3 and 3.4 call them without the GVL for IO#pread/IO#pwrite.
    # With the GVL they come here: the transfer runs on a worker thread,
    # since a regular file is always "ready" and would stall the loop.
    # Returns the byte count or -errno.
    private def __offload_positional(writing, io, buffer, from, length, offset)
      work = if writing
               -> { Farce.__pwrite(io, buffer, from, length, offset) }
             else
               -> { Farce.__pread(io, buffer, from, length, offset) }
             end
      return work.call if closed? || Fiber.blocking?

      offload(work)
    end

    # The same for Ruby 4.1's io_pread/io_pwrite (scheduler interface
    # version 4: one transfer of at most length bytes of buffer[offset,
    # length]; ext/farce/hook_io/positional_io.c).
    private def __offload_positional_once(writing, io, buffer, from, offset, length)
      work = if writing
               -> { Farce.__pwrite_once(io, buffer, from, offset, length) }
             else
               -> { Farce.__pread_once(io, buffer, from, offset, length) }
             end
      return work.call if closed? || Fiber.blocking?

      offload(work)
    end

    # io_read/io_write on a regular file whose bytes are not in the page
    # cache, on a loop without completion operations (ext/farce/hook_io/io_transfer.c,
    # file_step; the Ruby loop's transfer): one read or write of
    # buffer[offset, length] at file position `from` (-1: the file's own)
    # on a worker thread. moved[0] gets the count as soon as the worker has
    # it, so that the caller can give a read's bytes back when an exception
    # reaches this fiber while it waits. Returns the count or -errno.
    private def __offload_file(writing, io, buffer, from, offset, length, moved)
      work = -> { moved[0] = Farce.__file_transfer_once(writing, io, buffer, from, offset, length) }
      return work.call if closed? || Fiber.blocking?

      offload(work)
    end

    # Windows only (ext/farce/hook_io/stream_offload_windows.c): a read or
    # write of a file or console, which nothing there can wait on (the IOCP
    # driver polls sockets only), runs on a worker thread, where it blocks
    # that thread alone. A pipe comes here only when its wait mode cannot be
    # changed: the C caller polls the pipe from the fiber until it holds
    # bytes or has room, and reads or writes only what goes at once (a
    # worker blocked in the call would hold an exception or Fiber#kill aimed
    # at this fiber until the other end moved, and a few big writes would
    # hold every worker). IO::Buffer#read/#write on a thread without a
    # scheduler is the plain system call, looped until length bytes moved
    # (one call for a length of 0). Returns the byte count or -errno, as the
    # hook does; moved[0] gets it as soon as the worker has it, so that the
    # caller can give a read's bytes back when an exception reaches this
    # fiber while it waits (ext/farce/hook_io/io_transfer.c, stream_offload).
    private def __offload_stream(writing, io, buffer, length, offset, moved)
      work = lambda do
        moved[0] = writing ? buffer.write(io, length, offset) : buffer.read(io, length, offset)
      rescue SystemCallError => e
        -e.errno
      end
      return work.call if closed? || Fiber.blocking?

      # A read of a file or console goes through io_wait first, as a read
      # that may wait does: a fiber past its turn budget gives the loop its
      # turn there, so a Timeout due by then ends it before a worker takes
      # the read.
      io_wait(io, IO::READABLE, nil) unless writing
      offload(work)
    end

    # Runs work on the worker pool; meanwhile the loop lets the workers
    # have the GVL at every iteration.
    private def offload(work)
      __offload(1)
      begin
        @worker_pool.run(work)
      ensure
        __offload(-1)
      end
    end

    # Ruby 3.2+: IO.select in a fiber parks only that fiber. Arguments and
    # result follow IO.select: arrays (or nil) of IO-like objects, a timeout
    # in seconds (nil: forever); returns [readable, writable, exceptional]
    # holding the caller's own objects, or nil when the timeout passed.
    def io_select(readables, writables = nil, exceptables = nil, timeout = nil)
      Farce::Select.new(self, readables, writables, exceptables, timeout).call
    end

    # Ruby calls this when the thread exits or Fiber.set_scheduler replaces
    # the scheduler: runs every fiber to its end, then frees the core.
    #
    # As Async's (docs/contracts.md): when the thread is on its way out with
    # an exception (error, Ruby's $! there), the fibers are not run: those
    # still parked are unwound (see #abandon) and the core is freed, so the
    # exception is reported now instead of after every fiber's last wait
    # (TestFiberMutex#test_mutex_deadlock: a fiber parked for good inside a
    # Mutex#synchronize kept a thread that had raised from ending). And when
    # a fiber raises while they run, the rest are unwound and the core freed
    # before the exception propagates: nobody closes the scheduler after
    # this (at thread exit the ring and wake descriptors leaked). #close,
    # called by hand, still leaves the scheduler usable after a fiber raised.
    def scheduler_close(error = $!)
      @exiting_with = error
      begin
        close
      rescue Exception # rubocop:disable Lint/RescueException -- re-raised: only the rest is unwound first
        abandon unless closed?
        raise
      end
      # Ruby reads the thread's exception from $! once this returns: Ruby
      # code that clears it (a `break` out of a block does; the unwinding
      # avoids them) left Thread#join raising nothing, nothing reported
      __restore_errinfo(error) if error && respond_to?(:__restore_errinfo, true) # the native extension's
      nil
    ensure
      @exiting_with = nil
    end

    def close
      return if closed?
      # Thread#kill, or a thread on its way out with an exception
      # (scheduler_close): the fibers are unwound, not run to their end
      return abandon if Thread.current.status == "aborting" || @exiting_with

      run
      __release
      @worker_pool.close
      nil
    end

    # Frees the core without running the remaining fibers to their end: each
    # fiber still parked is unwound first (Fiber#kill, or Farce::Unwind
    # raised into it: see Unwinding), so that its ensure clauses run and
    # Ruby takes it out of the Mutex, Queue or ConditionVariable it waits
    # in. Farce.run uses it when the program raised.
    def abandon
      unwind_parked_fibers
      nil
    ensure # an INT trap's Interrupt while unwinding: the core is freed all the same
      __release
      @worker_pool.close
    end

    def inspect
      "#<#{self.class} backend=#{closed? ? 'closed' : backend.inspect}>"
    end
  end
end
