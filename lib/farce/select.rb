# frozen_string_literal: true

module Farce
  # IO.select for Scheduler#io_select (Ruby 3.2+), built on the scheduler's
  # own io_wait: a non-blocking check of every IO first, then, unless
  # something is ready or the timeout is zero, one short-lived fiber per IO
  # parks in io_wait while the calling fiber blocks until the first of them
  # reports readiness or the timeout passes. The other waits are then
  # cancelled. Only the calling fiber waits; the loop runs the others.
  class Select
    EVENTS = [IO::READABLE, IO::WRITABLE, IO::PRIORITY].freeze

    # Raised into a waiting helper fiber to cancel its io_wait.
    class Cancel < Exception; end # rubocop:disable Lint/InheritException -- must not be caught by `rescue => e`

    def initialize(scheduler, readables, writables, exceptables, timeout)
      @scheduler = scheduler
      @lists = [list(readables), list(writables), list(exceptables)]
      @timeout = interval(timeout)
    end

    # [readable, writable, exceptional] with the caller's objects, or nil
    # when the timeout passed first.
    def call
      ios = @lists.map { |objects| objects.map { |object| io_of(object) } }
      wanted = {}.compare_by_identity
      ios.each_with_index { |list, k| list.each { |io| wanted[io] = (wanted[io] || 0) | EVENTS[k] } }
      if wanted.empty? # IO.select([], [], [], t) sleeps
        @timeout ? sleep(@timeout) : sleep
        return nil
      end
      ready = probe(wanted)
      ready = wait(wanted) if ready.empty? && @timeout != 0
      return nil if ready.empty?

      @lists.each_with_index.map do |objects, k|
        objects.each_index.select { |i| (ready[ios[k][i]] || 0) & EVENTS[k] != 0 }.map { |i| objects[i] }
      end
    end

    private

    def list(objects)
      return [] if objects.nil?
      raise TypeError, "wrong argument type #{objects.class} (expected Array)" unless objects.is_a?(Array)

      objects
    end

    def interval(timeout)
      return nil if timeout.nil?
      raise TypeError, "can't convert #{timeout.class} into time interval" unless timeout.is_a?(Numeric)
      raise ArgumentError, "time interval must not be negative" if timeout.negative?

      timeout
    end

    def io_of(object)
      io = object.is_a?(IO) ? object : IO.try_convert(object)
      raise TypeError, "no implicit conversion of #{object.class} into IO" unless io
      raise IOError, "closed stream" if io.closed?

      io
    end

    # What is ready right now, without parking.
    def probe(wanted)
      ready = {}.compare_by_identity
      wanted.each do |io, events|
        got = @scheduler.__send__(:__select_ready, io, events)
        ready[io] = got unless got.zero?
      end
      ready
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # Parks the calling fiber until one IO is ready (returns {io => events}),
    # the timeout passed (returns {}), or an IO was closed (raises IOError).
    def wait(wanted)
      caller = Fiber.current
      ready = {}.compare_by_identity
      error = nil
      blocked = false
      helpers = wanted.map do |io, events|
        Fiber.new(blocking: false) do
          got = @scheduler.io_wait(io, events, nil)
          ready[io] = got if got
          @scheduler.unblock(self, caller) if blocked
        rescue Cancel
          nil
        rescue StandardError => e # closed while waiting: IOError
          error ||= e
          @scheduler.unblock(self, caller) if blocked
        end
      end
      begin
        # each parks in io_wait, or finishes at once when ready: started as a
        # fiber of the scheduler (__start, as Fiber.schedule's), whose park
        # comes back here; a plain resume would make it a fiber resumed
        # inside this one's turn, which waits with the thread instead
        helpers.each { |helper| @scheduler.__send__(:__start, helper) }
        deadline = @timeout && monotonic + @timeout
        while ready.empty? && !error
          remaining = deadline && deadline - monotonic
          break if remaining && remaining <= 0

          blocked = true
          @scheduler.block(self, remaining)
          blocked = false
        end
      ensure
        blocked = false
        helpers.each { |helper| helper.raise(Cancel) if helper.alive? }
      end
      raise error if error

      ready
    end
  end
end
