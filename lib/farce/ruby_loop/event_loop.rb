# frozen_string_literal: true

module Farce
  class RubyLoop
    # The loop: run, one iteration (resume what is ready, drain the inbox, deliver interrupts),
    # the IO.select over every parked IO, timers firing and the close scan.

    def run
      usable!
      raise Farce::Error, "Farce::Scheduler#run is already running (it is not re-entrant)" if @running
      unless Fiber.blocking?
        raise Farce::Error, "Farce::Scheduler#run must be called from a blocking fiber (the thread's own), " \
                            "not from a fiber the scheduler runs: it is not re-entrant"
      end

      @running = true
      @thread = Thread.current
      begin
        loop_until_idle
      ensure
        @running = false
      end
      nil
    end

    private

    def loop_until_idle
      end_turn if @turn_active # Fiber.schedule's turns before run (turn_check)
      while @open
        @iterations += 1
        resume_ready
        return unless @open

        # Worker threads need the GVL to start a job and hand back its
        # result; a loop that never blocks would make them wait a time slice.
        Thread.pass if @offloads.positive?
        drain_inbox
        unless @interrupts.empty?
          deliver_interrupts
          next
        end
        return if @parked <= 0

        wait_for_events
      end
    end

    # Resumes what was ready when the iteration started; fibers that become
    # ready meanwhile wait for the next one. A fiber's exception propagates
    # out of run with the rest still queued.
    def resume_ready
      @ready.size.times do
        break unless @open

        item, value = @ready.shift
        if item.is_a?(Alarm)
          # taken before it is raised: the watcher thread (raise_held_alarms)
          # must not raise it again while the fiber runs its rescue
          exception = item.exception
          item.exception = nil
          @alarms.delete(item)
          in_turn(item.fiber) { item.fiber.raise(*exception) } if exception && item.fiber.alive? # nil: cancelled
          next
        end
        next unless item.state == :ready

        finish(item)
        @completed += 1
        @wakeups.record(monotonic - item.ready_at) if item.ready_at && @wakeups_kept
        # an interrupt queued for this fiber is raised at this wait (see take_interrupt)
        interrupt = @interrupts.empty? ? nil : take_interrupt(item.fiber)
        begin_turn(item.fiber)
        begin
          if item.fiber.alive?
            in_turn(item.fiber) { interrupt ? item.fiber.raise(*interrupt) : item.fiber.resume(value) }
          end
        ensure
          end_turn
        end
      end
    end

    # The oldest exception fiber_interrupt queued for fiber (a Fiber
    # target), in an array; nil when none is. Raised at the wait that just
    # finished, instead of resuming it: Ruby 4.0 interrupts the blocking
    # operation an IO#close found the fiber in, and the fiber leaves that
    # operation as soon as it is resumed. Left queued for deliver_interrupts,
    # it was raised into whatever the fiber waited on next (a sleep after the
    # read the close was for). Every interrupt queued for the fiber is taken
    # out: all were queued during the wait it leaves now, each to end that
    # blocking operation, and the first one ends it (Ruby 4.1's operation
    # stand-ins say the same: one whose operation is over is left alone).
    #
    # Removed by index, last first, in place: another thread's fiber_interrupt
    # only appends, so the indexes found stay right.
    def take_interrupt(fiber)
      mine = @interrupts.each_index.select { |i| @interrupts[i][0].equal?(fiber) }
      return nil if mine.empty?

      first = @interrupts[mine.first][1]
      mine.reverse_each { |i| @interrupts.delete_at(i) }
      [first]
    end

    def drain_inbox
      until @inbox.empty?
        item = @inbox.pop(true)
        # a Wait found parked by the unblocking thread, or a fiber it found in none (see unblock)
        item.is_a?(Wait) ? make_ready(item, :woken) : unblocked(item, from_inbox: true)
      end
    rescue ThreadError
      nil
    end

    INTERRUPT_TARGET = %i[alive? raise transfer].freeze

    # A target that is not a Fiber names no fiber to look for among the
    # waits: while its operation goes on (alive?), its fiber is in a hook,
    # so parked (the loop runs), and the target raises into it itself.
    def deliver_interrupts
      until @interrupts.empty?
        fiber, exception = @interrupts.first
        unless (!fiber.is_a?(Fiber) || @waits.key?(fiber)) && fiber.alive?
          @interrupts.shift
          next
        end

        # a Fiber's: with the others queued for the same wait, which are not
        # for the wait it may park in inside the raise (take_interrupt)
        fiber.is_a?(Fiber) ? take_interrupt(fiber) : @interrupts.shift
        in_turn(fiber) { fiber.raise(exception) }
        return unless @open
      end
    end

    # One IO.select over every parked IO and the wake pipe, bounded by the
    # next timer (and the close scan while IOs are parked).
    def wait_for_events(poll_only: false)
      scan_closed
      readers = [@wake_r]
      writers = []
      priority = []
      @io_waits.each do |io, waits|
        events = waits.inject(0) { |all, wait| all | wait.events }
        readers << io if (events & IO::READABLE) != 0
        writers << io if (events & IO::WRITABLE) != 0
        priority << io if (events & IO::PRIORITY) != 0
      end
      timeout = poll_only ? 0 : select_timeout
      begin
        waited = monotonic
        ready = IO.select(readers, writers, priority, timeout)
        @idle += monotonic - waited
      rescue IOError, Errno::EBADF
        find_closed # an IO closed (by another thread) since the scan
        return
      end
      dispatch(ready) if ready
      fire_timers
      # fibers that gave the loop a turn run behind what this poll made ready
      @ready.concat(@yielded)
      @yielded.clear
    end

    def select_timeout
      return 0 unless @ready.empty? && @yielded.empty? && @inbox.empty? && @interrupts.empty?

      timeout = nil
      deadline = @timers.next_deadline
      timeout = [deadline - monotonic, 0].max if deadline
      timeout = [timeout || CLOSE_SCAN, CLOSE_SCAN].min unless @io_waits.empty?
      timeout
    end

    def dispatch(ready)
      readable, writable, priority = ready
      got = {}.compare_by_identity
      readable.each { |io| got[io] = (got[io] || 0) | IO::READABLE }
      writable.each { |io| got[io] = (got[io] || 0) | IO::WRITABLE }
      priority.each { |io| got[io] = (got[io] || 0) | IO::PRIORITY }
      if got.delete(@wake_r)
        nil while @wake_r.read_nonblock(256, exception: false).is_a?(String)
      end
      got.each do |io, events|
        Array(@io_waits[io]).dup.each do |wait|
          mine = wait.events & events
          make_ready(wait, mine) unless mine.zero?
        end
      end
    end

    def fire_timers
      now = monotonic
      while (target = @timers.pop_due(now))
        if target.is_a?(Alarm)
          target.timer = nil
          @ready << [target, nil]
        else
          due = target.timer&.deadline
          target.timer = nil
          make_ready(target, :timed_out)
          target.ready_at = due if due && @wakeups_kept # wake-up latency counts from the due time, as the native loop's
        end
      end
    end

    def scan_closed
      return if @io_waits.empty?

      now = monotonic
      return if now - @last_scan < CLOSE_SCAN && @ready.empty?

      @last_scan = now
      @io_waits.keys.each { |io| wake_io(io, :closed) if io.closed? }
    end

    def find_closed
      @io_waits.keys.each do |io|
        next wake_io(io, :closed) if io.closed?

        blocking { IO.select([io], nil, nil, 0) }
      rescue IOError, Errno::EBADF
        wake_io(io, :closed)
      end
    end

    def wake_io(io, value)
      Array(@io_waits[io]).dup.each { |wait| make_ready(wait, value) }
    end
  end
end
