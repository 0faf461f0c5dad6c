# frozen_string_literal: true

require "fcntl"
require "io/nonblock"
require_relative "ruby_loop/timers"
require_relative "ruby_loop/latency"
require_relative "ruby_loop/stats"
require_relative "ruby_loop/turns"
require_relative "ruby_loop/stall_watchdog"
require_relative "ruby_loop/waits"
require_relative "ruby_loop/event_loop"
require_relative "ruby_loop/parking"
require_relative "ruby_loop/transfer"
require_relative "ruby_loop/held_raises"

module Farce
  # Whether Ruby calls io_read/io_write(io, buffer, offset, length), one
  # transfer that never waits (scheduler interface version 4, Ruby 4.1:
  # ruby/ruby#18483), rather than (io, buffer, length, offset) with length
  # the least to move. The native extension defines it from Ruby's headers;
  # without the extension, IO::Buffer's version (3 came with the same
  # change) tells, as io-event's pure-Ruby selector asks.
  unless const_defined?(:SINGLE_TRANSFER_HOOKS, false)
    SINGLE_TRANSFER_HOOKS = IO::Buffer.const_defined?(:VERSION) && IO::Buffer::VERSION >= 3
  end

  # farce's Ruby loop (the pure-Ruby fallback): the event loop a Farce::Scheduler uses when the
  # native (Go) core is not there (no Go at install, an unsupported OS, a
  # failed build, a forked child whose reload of the Go core was refused) or when
  # `backend: :ruby` asks for it. It keeps the native loop's contract (see
  # ext/farce/front_ends/fiber_scheduler.c over the loop): the same hooks, results, stats keys and errors, with
  # IO.select as the kernel wait.
  #
  # One RubyLoop belongs to one scheduler; Hooks (ruby_loop/hooks.rb) routes
  # the scheduler's hook methods to it.
  #
  # This file holds its state, its lifecycle (new, closed?, release) and the
  # bookkeeping scheduler.rb calls; the rest is in ruby_loop/, one purpose a file:
  # waits.rb (the hooks that wait), transfer.rb (io_read/io_write and the
  # blocking fiber), parking.rb, event_loop.rb, turns.rb, stall_watchdog.rb,
  # stats.rb, timers.rb, latency.rb, hooks.rb.
  class RubyLoop
    # The hook forms the Ruby loop answers (Hooks): Farce::SINGLE_TRANSFER_HOOKS.
    SINGLE_TRANSFER = Farce::SINGLE_TRANSFER_HOOKS
    # How often parked IOs are checked for having been closed (Ruby before
    # 4.0 has no close hook), as the native loop's close scan.
    CLOSE_SCAN = 0.05
    # Forever, for IO.select, as the native loop treats huge timeouts.
    FOREVER = 9.0e9
    WAKE = "!"
    EVENTS = IO::READABLE | IO::PRIORITY | IO::WRITABLE

    # One fiber parked in one of this loop's waits. state: :parked, then
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

    # Timeout.timeout's alarm: raise [class, *arguments] in fiber at
    # deadline (monotonic seconds). exception is nil once raised or cancelled.
    Alarm = Struct.new(:fiber, :exception, :timer, :deadline)

    attr_reader :fallback_reason
    attr_writer :file_offloader

    def initialize(fallback_reason)
      @fallback_reason = fallback_reason
      @fork_generation = RubyLoop.fork_generation
      @main_ractor = Farce.main_ractor? # whose IO#reopen counts it reads (waits.rb, reopens)
      @thread = Thread.current
      @running = false
      @open = true
      @wake_r, @wake_w = IO.pipe
      @timers = Timers.new
      @ready = []                          # [Wait or Alarm, value]
      @yielded = []                        # [Wait, value]: ready after the next poll's events (turns)
      @waits = {}.compare_by_identity      # fiber -> its Wait
      @io_waits = {}.compare_by_identity   # IO -> [Wait]
      @fd_owners = ObjectSpace::WeakMap.new # descriptor -> the IO that last waited on it (not kept alive)
      @fd_files = {}                       # descriptor -> the open file it named then (claim_descriptor)
      @fd_reopens = {}                     # descriptor -> IO#reopen calls counted when it was claimed
      @raw_writers = {}                    # descriptor -> IO (see raw_writer)
      @inbox = Thread::Queue.new           # Waits other threads unblocked
      # Fibers unblocked before their wait was registered: Queue and Mutex
      # list a fiber as waiting before they call `block`, and another thread
      # may run in between (these are Ruby methods). Its next unblockable
      # park ends at once: a spurious wakeup (which they allow) instead of a
      # lost one (a hang).
      @early_unblocks = {}.compare_by_identity
      @interrupts = []                     # [fiber, exception] from fiber_interrupt
      @alarms = {}.compare_by_identity     # Alarm -> true, until raised or cancelled (raise_held_alarms)
      # A raise of the watcher's into this thread (raise_held_alarms): the
      # fiber it is for, until that fiber's turn takes it (take_held_raise),
      # the exception, and the fiber while the watcher is inside Thread#raise
      @held_fiber = @held_error = @held_raising = nil
      @live_fibers = 0
      @parked = 0
      # The waits of @parked in state :ready, counted as they change state:
      # the ready queues also hold alarms, and the entries of waits that an
      # exception or Fiber#kill finished before the loop came to them; and
      # #stats, which a plain thread may call, must not iterate @waits while
      # the loop's thread adds to it.
      @ready_waits = 0
      @offloads = 0
      @file_offloader = nil                # Scheduler#__offload_file (see file_transfer)
      @file_transfers_cached = 0
      @file_transfers_offloaded = 0
      @iterations = 0
      @completed = 0
      @last_scan = monotonic
      @turn_budget = nil
      @turn_started = @created = monotonic
      @turns_given = 0
      @turn_seq = 0
      @turn_active = false
      @stall_threshold = nil
      @stall_fiber = @stall_fiber_seq = nil # see stall_crossed
      @stalls = 0
      @idle = 0.0
      @wakeups = LatencyHistogram.new
      @wakeups_kept = false # from the first stats call on, as the native loop's
    end

    def backend
      :ruby
    end

    # Inert in a forked child, as the native scheduler: the parent's fibers
    # and waits do not belong to the child.
    def closed?
      !@open || inert?
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
      if duration
        alarm.deadline = monotonic + duration
        alarm.timer = @timers.add(alarm.deadline, alarm)
        @alarms[alarm] = true
      end
      alarm
    end

    # An alarm already due may wait in @ready behind the fiber it is for
    # (resumed first from a turn or a wait), whose block then ends: the
    # exception is dropped here, or it would reach the fiber after its
    # Timeout block was left.
    def cancel_alarm(alarm)
      return nil unless alarm.is_a?(Alarm)

      @timers.cancel(alarm.timer) if alarm.timer
      alarm.timer = nil
      alarm.exception = nil
      @alarms.delete(alarm)
      # a raise the watcher started before the block ended lands here, in
      # the Timeout's ensure, as Timeout's own thread's may without a
      # scheduler: the deadline had passed
      take_held_raise(ending_turn: false)
      nil
    end

    # Farce::HeldAlarms' watcher thread (lib/farce/held_alarms.rb), never
    # the loop's: raises into the loop's thread the earliest alarm more
    # than grace seconds past its deadline whose fiber is the one running
    # (@turn_owner: the loop has not come back since, so it could not raise
    # it), as Timeout does without a scheduler; the native scheduler's
    # __raise_held_alarms is the same (ext/farce/front_ends/fiber_scheduler.c).
    # Returns the seconds until something is left to look at, or nil.
    # The watcher runs this with the GVL, which it got where the loop's
    # thread let it go (a wait, a thread switch): that thread runs nothing
    # meanwhile. The exception is made before the second look, since
    # exception_class.exception may be Ruby code.
    def raise_held_alarms(grace)
      return nil if closed? || Thread.current == @thread # Thread#raise would raise right here

      now = monotonic
      owner = @turn_owner
      held = nil
      earliest = nil
      @alarms.keys.each do |alarm|
        next unless alarm.exception

        overdue = now - alarm.deadline - grace
        if overdue.negative?
          look = -overdue
        elsif owner && owner.equal?(alarm.fiber)
          held = alarm if !held || alarm.deadline < held.deadline
          next
        elsif @running
          look = overdue.clamp(grace, 0.1) # see the native overdue_look_ns
        else
          next # outside run: the loop raises it when it runs (the native loop's reason)
        end
        earliest = look if !earliest || look < earliest
      end
      return earliest unless held

      exception = held.exception
      error = exception[0].exception(*exception[1..])
      raise_held(owner, held, exception, error)
      [earliest || grace, grace].min
    end

    # The watcher's half of a raise into a held fiber. The fiber is named
    # (@held_fiber, @held_raising) before the look at @turn_owner, and a turn
    # that ends clears @turn_owner before it looks at @held_fiber
    # (take_held_raise): whatever Ruby switches between, one of the two sees
    # the other. A turn that ends while Thread#raise runs (it calls the
    # exception's #exception, where Ruby may let the loop's thread run
    # before the exception is queued) waits for it and takes it there, in
    # the fiber it is for; queued after the turn, Ruby would raise it at the
    # thread's next interrupt check: in the loop, or in another fiber.
    def raise_held(owner, held, exception, error)
      @held_error = error
      @held_raising = @held_fiber = owner
      if !closed? && @turn_owner.equal?(owner) && held.exception.equal?(exception)
        held.exception = nil
        @alarms.delete(held)
        @thread.raise(error)
      elsif @held_fiber.equal?(owner)
        @held_fiber = @held_error = nil
      end
    ensure
      @held_raising = nil
    end

    # The live fibers parked in this loop's waits, for unwinding
    # (lib/farce/unwind.rb); [] off the loop's thread or once released.
    def parked_fibers
      return [] unless @open && !inert? && Thread.current == @thread

      @waits.keys.select(&:alive?)
    end

    # One iteration without waiting, between rounds of unwinding: what the
    # unwound fibers' ensure clauses made ready runs. Whether anything was
    # ready (Unwinding repeats it until nothing is). A resumed fiber's
    # exception propagates.
    def unwind_turn
      return false unless @open && !inert? && Thread.current == @thread

      drain_inbox
      wait_for_events(poll_only: true)
      ran = !@ready.empty?
      resume_ready
      ran
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
      @alarms.clear
      @timers = Timers.new
      @parked = 0
      @ready_waits = 0
      nil
    end

    private

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
      @fork_generation != RubyLoop.fork_generation
    end

    def to_io(io)
      return io if io.is_a?(IO)

      IO.try_convert(io) || raise(TypeError, "no implicit conversion of #{io.class} into IO")
    end

    def integer(value)
      raise TypeError, "no implicit conversion of #{value.class} into Integer" unless value.is_a?(Numeric)

      Integer(value)
    end

    # Seconds (nil: none) as the native loop reads them.
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
