# frozen_string_literal: true

require_relative "ruby_core/timers"
require_relative "ruby_core/latency"

module Farce
  # farce's pure-Ruby core: the event loop a Farce::Scheduler uses when the
  # native (Go) core is not there (no Go at install, an unsupported OS, a
  # failed build, a forked child whose reload of the Go core was refused) or when
  # `backend: :ruby` asks for it. It keeps the native core's contract (see
  # ext/farce/fiber_scheduler.c over the loop core): the same hooks, results, stats keys and errors, with
  # IO.select as the kernel wait.
  #
  # One RubyCore belongs to one scheduler; Hooks (ruby_core/hooks.rb) routes
  # the scheduler's core methods to it.
  class RubyCore
    # How often parked IOs are checked for having been closed (Ruby before
    # 4.0 has no close hook), as the native core's close scan.
    CLOSE_SCAN = 0.05
    # Forever, for IO.select, as the native core treats huge timeouts.
    FOREVER = 9.0e9
    WAKE = "!"
    EVENTS = IO::READABLE | IO::PRIORITY | IO::WRITABLE

    # One fiber parked in one of this core's waits. state: :parked, then
    # :ready (queued to be resumed with `value`), then :finished.
    class Wait
      attr_reader :fiber, :io, :events, :unblockable
      attr_accessor :state, :timer, :ready_at

      def initialize(fiber, io: nil, events: 0, unblockable: false)
        @fiber = fiber
        @io = io
        @events = events
        @unblockable = unblockable
        @state = :parked
        @timer = nil
      end
    end

    # Timeout.timeout's alarm: raise [class, *arguments] in fiber.
    Alarm = Struct.new(:fiber, :exception, :timer)

    attr_reader :fallback_reason

    def initialize(fallback_reason)
      @fallback_reason = fallback_reason
      @fork_generation = RubyCore.fork_generation
      @thread = Thread.current
      @running = false
      @open = true
      @wake_r, @wake_w = IO.pipe
      @timers = Timers.new
      @ready = []                          # [Wait or Alarm, value]
      @yielded = []                        # [Wait, value]: ready after the next poll's events (turns)
      @waits = {}.compare_by_identity      # fiber -> its Wait
      @io_waits = {}.compare_by_identity   # IO -> [Wait]
      @inbox = Thread::Queue.new           # Waits other threads unblocked
      # Fibers unblocked before their wait was registered: Queue and Mutex
      # list a fiber as waiting before they call `block`, and another thread
      # may run in between (these are Ruby methods). Its next unblockable
      # park ends at once: a spurious wakeup (which they allow) instead of a
      # lost one (a hang).
      @early_unblocks = {}.compare_by_identity
      @interrupts = []                     # [fiber, exception] from fiber_interrupt
      @live_fibers = 0
      @parked = 0
      @offloads = 0
      @iterations = 0
      @completed = 0
      @last_scan = monotonic
      @turn_budget = nil
      @turn_started = @created = monotonic
      @turns_given = 0
      @turn_seq = 0
      @turn_active = false
      @stall_threshold = nil
      @stalls = 0
      @idle = 0.0
      @wakeups = LatencyHistogram.new
      @wakeups_kept = false # from the first stats call on, as the native core's
    end

    def backend
      :ruby
    end

    # Inert in a forked child, as the native scheduler: the parent's fibers
    # and waits do not belong to the child.
    def closed?
      !@open || inert?
    end

    def stats
      usable!
      @wakeups_kept = true
      {
        backend: :ruby,
        fibers: @live_fibers,
        parked_fibers: @parked,
        pending_waits: @waits.size - @ready.size - @yielded.size,
        ready_waits: @ready.size + @yielded.size,
        timers: @timers.size,
        registered_descriptors: @io_waits.size,
        iterations: @iterations,
        completed_waits: @completed,
        goroutines: 0,
        completion_ops: false,
        completion_ops_submitted: 0,
        turn_budget: @turn_budget,
        turns_given: @turns_given,
        stall_threshold: @stall_threshold,
        stalls: @stalls,
        wakeups: @wakeups.count,
        wakeup_p50: @wakeups.percentile(0.50),
        wakeup_p90: @wakeups.percentile(0.90),
        wakeup_p99: @wakeups.percentile(0.99),
        wakeup_max: @wakeups.max
      }.merge(load_stats)
    end

    def load_stats
      total = monotonic - @created
      idle = [@idle, total].min
      { idle_seconds: idle, busy_seconds: total - idle, load: total.positive? ? (total - idle) / total : 0.0 }
    end

    # ---- bookkeeping the Ruby half of Farce::Scheduler calls (scheduler.rb)

    def fiber_started
      @live_fibers += 1
      nil
    end

    def fiber_finished
      @live_fibers -= 1
      nil
    end

    def offload(delta)
      @offloads = [@offloads + delta, 0].max
      nil
    end

    def alarm(fiber, seconds, exception_class, arguments)
      usable!
      raise TypeError, "wrong argument type #{arguments.class} (expected Array)" unless arguments.is_a?(Array)

      alarm = Alarm.new(fiber, [exception_class, *arguments].freeze)
      duration = interval(seconds)
      alarm.timer = @timers.add(monotonic + duration, alarm) if duration
      alarm
    end

    def cancel_alarm(alarm)
      @timers.cancel(alarm.timer) if alarm.is_a?(Alarm) && alarm.timer
      alarm.timer = nil if alarm.is_a?(Alarm)
      nil
    end

    # The live fibers parked in this core's waits, for unwinding
    # (lib/farce/unwind.rb); [] off the loop's thread or once released.
    def parked_fibers
      return [] unless @open && !inert? && Thread.current == @thread

      @waits.keys.select(&:alive?)
    end

    # One iteration without waiting, between rounds of unwinding: what the
    # unwound fibers' ensure clauses made ready runs. A resumed fiber's
    # exception propagates.
    def unwind_turn
      return unless @open && !inert? && Thread.current == @thread

      drain_inbox
      wait_for_events(poll_only: true)
      resume_ready
      nil
    end

    # Forgets every wait without resuming it (close, abandon).
    def release
      return nil unless @open

      @open = false
      unless inert?
        @wake_r.close
        @wake_w.close
      end
      @ready.clear
      @yielded.clear
      @waits.clear
      @early_unblocks.clear
      @io_waits.clear
      @interrupts.clear
      @timers = Timers.new
      @parked = 0
      nil
    end

    # ---- turns (see ext/farce/loop_core.c: the native core's, the same) ----

    # Seconds a fiber may hold the loop before a hook that would not block
    # gives the loop a turn (nil: never); Scheduler.new(turn_budget:) sets it.
    attr_accessor :turn_budget

    # Called where a hook would go on without blocking (Fiber.schedule, a
    # read or write that moved data): past the budget, a fiber of ours
    # yields (the loop resumes it after one iteration); the thread's own
    # fiber, outside `run`, runs one iteration itself without waiting.
    def turn_check
      if Thread.current != @thread
        # an idle loop moves to the thread that uses it (the native core's
        # claim, so the stall watchdog samples that thread); Fiber.schedule
        # called by hand on another thread's busy scheduler gets no turn
        return nil if @running || @parked.positive?

        @thread = Thread.current
      end
      begin_turn(Fiber.current) if @stall_threshold && !@turn_active # see the native __turn_check
      budget = @turn_budget
      return nil unless budget && monotonic - @turn_started >= budget && !closed?

      @turns_given += 1
      if !Fiber.blocking?
        park(Wait.new(Fiber.current), :after_poll)
      elsif !@running
        @iterations += 1
        drain_inbox
        wait_for_events(poll_only: true)
        resume_ready
      end
      @turn_started = monotonic
      nil
    end

    # ---- stall detection (the native core's is ext/farce/stall.c) ----------

    # Stall detection on (seconds) or off (nil); reporter gets
    # __report_stall(fiber, seconds, backtrace) when a stalled turn ends.
    # A watchdog thread samples the loop thread's backtrace (the running
    # fiber's) once a turn passes the threshold: it gets the GVL at Ruby's
    # next thread switch (a time slice, 100 ms), or when a C call holding
    # the GVL returns, so short thresholds are seen late, never lost.
    def watch_stalls(seconds, reporter)
      @stall_threshold = seconds
      @stall_reporter = reporter
      return nil if !seconds || @stall_watchdog&.alive?

      @stall_watchdog = Thread.new { stall_watchdog }
      @stall_watchdog.report_on_exception = false
      nil
    end

    # ---- hooks ------------------------------------------------------------

    def io_wait(io, events, timeout)
      usable!
      io = to_io(io)
      events = integer(events)
      if events <= 0 || (events & ~EVENTS) != 0
        raise ArgumentError, "io_wait: invalid events #{events} (use IO::READABLE, IO::PRIORITY, IO::WRITABLE)"
      end

      duration = interval(timeout)
      raise IOError, "closed stream" if io.closed?

      if duration == 0 || Fiber.blocking? # a blocking fiber cannot park: the thread waits (issue 13 item 3)
        got = ready_now(io, events, duration)
        return got.zero? ? false : got
      end
      wait = Wait.new(Fiber.current, io: io, events: events)
      (@io_waits[io] ||= []) << wait
      result = park(wait, duration)
      raise IOError, "closed stream" if result == :closed

      result.is_a?(Integer) && result.positive? ? result : false
    end

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

    # kernel_sleep(duration = nil): Mutex#sleep and ConditionVariable#wait
    # come here and are woken by unblock.
    def kernel_sleep(*arguments)
      usable!
      raise ArgumentError, "wrong number of arguments (given #{arguments.size}, expected 0..1)" if arguments.size > 1

      duration = arguments.empty? ? nil : interval(arguments[0])
      if Fiber.blocking? # called by hand from a fiber that cannot park: the thread sleeps, as without a scheduler
        duration ? sleep(duration) : sleep
        return true
      end
      wait = Wait.new(Fiber.current, unblockable: true)
      park(wait, duration)
      true
    end

    def block(blocker, timeout = nil)
      usable!
      duration = interval(timeout)
      park(Wait.new(Fiber.current, unblockable: true), duration) != :timed_out
    end

    # Safe from any thread: another thread hands the wait to the loop through
    # the inbox and wakes its IO.select.
    def unblock(_blocker, fiber)
      return nil if closed?

      wait = @waits[fiber]
      unless wait&.unblockable
        if wait.nil? && fiber.is_a?(Fiber) && fiber.alive?
          @early_unblocks.delete_if { |f, _| !f.alive? } if @early_unblocks.size >= 1024 # fibers that finished
          @early_unblocks[fiber] = true
        end
        return nil
      end

      if Thread.current == @thread
        make_ready(wait, :woken)
      else
        @inbox << wait
        wake
      end
      nil
    end

    def yield
      usable!
      park(Wait.new(Fiber.current), 0)
      nil
    end

    def fiber_interrupt(fiber, exception)
      raise TypeError, "fiber_interrupt: #{fiber.class} is not a Fiber" unless fiber.is_a?(Fiber)
      return nil if closed?
      raise exception if fiber.equal?(Fiber.current)
      return nil unless fiber.alive?

      @interrupts << [fiber, exception]
      wake unless Thread.current == @thread
      nil
    end

    # Ruby 4.0 calls this before it closes a descriptor: its waiters raise
    # IOError at once. Another thread's close is left to the close scan.
    def io_close(target)
      return nil if closed? || Thread.current != @thread

      ios = if target.is_a?(Integer)
              @io_waits.keys.select { |io| !io.closed? && io.fileno == target }
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

    # ---- the loop ---------------------------------------------------------

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

    def stall_watchdog
      seen = nil
      while (threshold = @stall_threshold) && @open && !inert?
        sleep((threshold / 4).clamp(0.001, 0.05))
        seq = @turn_seq
        threshold = @stall_threshold or break # turned off meanwhile
        next unless @turn_active && seq != seen && monotonic - @turn_started >= threshold

        seen = seq
        backtrace = @thread.backtrace || []
        @stall_sample = [seq, @turn_fiber, backtrace] if @turn_active && @turn_seq == seq
      end
    end

    def begin_turn(fiber)
      end_turn if @turn_active
      @turn_started = monotonic
      @turn_fiber = fiber
      @turn_seq += 1
      @turn_active = true
    end

    # The turn that just ended: reported if the watchdog sampled it.
    def end_turn
      @turn_active = false
      sample = @stall_sample
      return unless sample && sample[0] == @turn_seq && @stall_threshold

      @stall_sample = nil
      @stalls += 1
      @stall_reporter&.__send__(:__report_stall, sample[1], monotonic - @turn_started, sample[2])
    end

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
          item.fiber.raise(*item.exception) if item.fiber.alive?
          next
        end
        next unless item.state == :ready

        finish(item)
        @completed += 1
        @wakeups.record(monotonic - item.ready_at) if item.ready_at && @wakeups_kept
        begin_turn(item.fiber)
        begin
          item.fiber.resume(value) if item.fiber.alive?
        ensure
          end_turn
        end
      end
    end

    def drain_inbox
      make_ready(@inbox.pop(true), :woken) until @inbox.empty?
    rescue ThreadError
      nil
    end

    def deliver_interrupts
      until @interrupts.empty?
        fiber, exception = @interrupts.shift
        next unless @waits.key?(fiber) && fiber.alive?

        fiber.raise(exception)
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
          target.ready_at = due if due && @wakeups_kept # wake-up latency counts from the due time, as the native core's
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

    # ---- parking ----------------------------------------------------------

    # Parks the current fiber until the loop resumes it; returns what the
    # loop passed (events, :timed_out, :woken, :closed). An exception raised
    # into the fiber meanwhile cancels the wait and propagates; a resume by
    # someone other than the loop is a spurious wakeup (:woken). `duration`:
    # seconds before :timed_out (nil: none; 0: resumed at the next iteration,
    # as kernel_sleep(0) and yield are; :after_poll: resumed behind what the
    # next poll makes ready, a turn's).
    def park(wait, duration = nil)
      if Fiber.blocking? # rubocop:disable Style/GuardClause
        raise Farce::Error, "Farce::Scheduler#block called from a fiber that cannot wait in it (a blocking fiber, " \
                            "e.g. the thread's root fiber): call it from a fiber the scheduler runs (Fiber.schedule)"
      end
      @waits[wait.fiber] = wait
      @parked += 1
      # after the registration: an unblock from now on finds the wait
      early = wait.unblockable && !@early_unblocks.empty? && @early_unblocks.delete(wait.fiber)
      if duration == 0 || duration == :after_poll || early
        wait.state = :ready
        wait.ready_at = monotonic if @wakeups_kept
        (duration == :after_poll && !early ? @yielded : @ready) << [wait, :woken]
      elsif duration
        wait.timer = @timers.add(monotonic + duration, wait)
      end
      resumed = false
      begin
        value = Fiber.yield
        resumed = true
      ensure
        # an exception raised into the fiber, or Fiber#kill (Ruby 3.3+),
        # which unwinds past any rescue: cancel the wait, let it propagate
        finish(wait) unless resumed
      end
      return value if wait.state == :finished

      finish(wait)
      :woken
    end

    def make_ready(wait, value)
      return unless wait.state == :parked

      wait.state = :ready
      wait.ready_at = monotonic if @wakeups_kept
      detach(wait)
      @ready << [wait, value]
    end

    def finish(wait)
      return if wait.state == :finished

      wait.state = :finished
      detach(wait)
      @waits.delete(wait.fiber) if @waits[wait.fiber].equal?(wait)
      @parked -= 1
    end

    def detach(wait)
      @timers.cancel(wait.timer) if wait.timer
      wait.timer = nil
      return unless wait.io

      list = @io_waits[wait.io]
      return unless list

      list.delete(wait)
      @io_waits.delete(wait.io) if list.empty?
    end

    # ---- helpers ----------------------------------------------------------

    def transfer(io, buffer, length, offset, reading:)
      usable!
      turn_check
      io = to_io(io)
      raise TypeError, "wrong argument type #{buffer.class} (expected IO::Buffer)" unless buffer.is_a?(IO::Buffer)

      length = integer(length)
      offset = integer(offset)
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
          blocking { reading ? io.read_nonblock(room, exception: false) : io.write_nonblock(buffer.get_string(offset + total, room), exception: false) }
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

    def wake
      @wake_w.write_nonblock(WAKE, exception: false)
    rescue IOError
      nil # released meanwhile
    end

    def usable!
      if inert?
        raise Farce::Error, "this Farce::Scheduler was created before fork and is inert in the child; " \
                            "create a new scheduler after fork"
      end
      raise Farce::Error, "scheduler is closed" unless @open
    end

    def inert?
      @fork_generation != RubyCore.fork_generation
    end

    def to_io(io)
      return io if io.is_a?(IO)

      IO.try_convert(io) || raise(TypeError, "no implicit conversion of #{io.class} into IO")
    end

    def integer(value)
      raise TypeError, "no implicit conversion of #{value.class} into Integer" unless value.is_a?(Numeric)

      Integer(value)
    end

    # Seconds (nil: none) as the native core reads them.
    def interval(timeout)
      return nil if timeout.nil?

      raise TypeError, "can't convert #{timeout.class} into time interval" unless timeout.is_a?(Numeric)

      seconds = timeout.to_f
      raise ArgumentError, "timeout is NaN" if seconds.nan?
      raise ArgumentError, "timeout must not be negative (got #{seconds})" if seconds.negative?

      seconds > FOREVER ? nil : seconds
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
