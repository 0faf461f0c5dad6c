# frozen_string_literal: true

require "socket"

module Farce
  # A Fiber::Scheduler over farce's Go core. The hooks Ruby calls most
  # (io_wait, io_read, io_write, kernel_sleep, block, unblock, run) are
  # implemented in C (ext/farce/shim.c); the rarely called ones live here.
  # All of them are public methods that a subclass may override and `super`.
  class Scheduler
    # Backends a caller may name. Which ones exist depends on the system.
    BACKENDS = %i[auto epoll poll].freeze

    # backend: :auto picks the best available driver (see #fallback_reason),
    # or name one of BACKENDS. The FARCE_BACKEND environment variable is the
    # default.
    def initialize(backend: ENV.fetch("FARCE_BACKEND", "auto"))
      name = backend.respond_to?(:to_sym) ? backend.to_sym : backend
      unless BACKENDS.include?(name)
        raise ArgumentError, "unknown farce backend #{backend.inspect} (choices: #{BACKENDS.map(&:inspect).join(', ')})"
      end

      __open(name.to_s)
    end

    # Fiber.schedule: starts a non-blocking fiber at once; returns it when it
    # first blocks (or finishes).
    def fiber(*arguments, &block)
      raise ArgumentError, "Fiber.schedule needs a block" unless block

      fiber = Fiber.new(blocking: false) do
        block.call(*arguments)
      ensure
        __fiber_finished
      end
      __fiber_started
      fiber.resume
      fiber
    end

    # Timeout.timeout: raises exception_class in the current fiber unless the
    # block finishes within duration seconds.
    def timeout_after(duration, exception_class, *exception_arguments)
      token = __alarm(Fiber.current, duration, exception_class, exception_arguments)
      begin
        yield duration
      ensure
        __cancel_alarm(token)
      end
    end

    # Process.wait and friends. A pidfd (Linux 5.3+) makes the child's exit a
    # readable descriptor the loop waits on; elsewhere, and for "any child"
    # waits (pid <= 0), a helper thread does the blocking waitpid.
    def process_wait(pid, flags)
      return Process::Status.wait(pid, flags) if (flags & Process::WNOHANG) != 0

      pidfd = pid.positive? ? Farce.__pidfd_open(pid) : nil
      return Thread.new { Process::Status.wait(pid, flags) }.value unless pidfd

      io = IO.for_fd(pidfd, autoclose: true)
      begin
        loop do
          io.wait_readable
          status = Process::Status.wait(pid, flags | Process::WNOHANG)
          return status if status
        end
      ensure
        io.close
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

    # Ruby calls this when the thread exits or Fiber.set_scheduler replaces
    # the scheduler: runs every fiber to its end, then frees the core. An
    # exception from a fiber propagates, leaving the scheduler usable.
    def scheduler_close
      close
    end

    def close
      return if closed?
      return abandon if Thread.current.status == "aborting" # Thread#kill: do not run fibers to their end

      run
      __release
      nil
    end

    # Frees the core without running the remaining fibers, which are never
    # resumed. Farce.run uses it when the program raised.
    def abandon
      __release
      nil
    end

    def inspect
      "#<#{self.class} backend=#{closed? ? 'closed' : backend.inspect}>"
    end
  end
end
