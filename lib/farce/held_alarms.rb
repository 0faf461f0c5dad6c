# frozen_string_literal: true

module Farce
  # Timeout's promise kept while a fiber holds the thread.
  #
  # A scheduler's timeout_after raises when the loop gets the thread back
  # and sees the deadline passed. A fiber that waits in a C call which does
  # not ask the scheduler (a blocking fiber's sleep or read, Ruby 3.4's
  # Happy Eyeballs in TCPSocket.new, a C extension's own wait) keeps the
  # loop from ever coming back, and its Timeout never fired. Without a
  # scheduler, Timeout keeps its promise from a thread of its own with
  # Thread#raise, which interrupts such a wait. This is that thread, for
  # farce's alarms: one per Ractor, started by its first timeout_after, it
  # sleeps until the earliest alarm is GRACE past its deadline, then asks
  # each scheduler that had alarms to raise the ones whose fiber is still
  # the one running (Scheduler#__raise_held_alarms: ext/farce/front_ends/
  # fiber_scheduler.c, or the Ruby loop's raise_held_alarms). An alarm
  # whose fiber is parked, or whose loop came back, is left to the loop,
  # which raises it at the fiber's wait as before; either side marks the
  # alarm when it raises it, so it is raised once.
  #
  # Why a Ruby thread: only Thread#raise puts an exception into a thread
  # that waits in C (the stall watchdog's signal and postponed job,
  # ext/farce/loop/stall.c, can interrupt the wait but cannot raise: Ruby
  # swallows an exception raised in a postponed job). And it needs the GVL
  # to look at the loop, which is what makes its look safe: it gets the GVL
  # only where the loop's thread let it go, in a wait or at Ruby's thread
  # switch, and the loop's thread runs nothing until the look is over
  # (unless it waits a whole time slice for the GVL meanwhile, which a look
  # of microseconds does not give it: see raise_held_alarm in C).
  module HeldAlarms
    # How far past its deadline an alarm waits for the loop before the
    # watcher raises it into a thread its fiber holds: the loop fires
    # alarms within a poll (well under a millisecond), so 10 ms is only
    # ever reached by a thread that is held.
    GRACE = 0.01
    # No wake-up needed (the watcher sleeps until told).
    NEVER = Float::INFINITY

    # On unless turned off (FARCE_HELD_TIMEOUTS=0, or HeldAlarms.enabled =
    # false): then a fiber's alarm is raised by the loop at its wait alone.
    @enabled = ENV["FARCE_HELD_TIMEOUTS"] != "0"
    # The main Ractor's watcher. Each other Ractor has one of its own, in its
    # own storage: Thread#raise reaches only threads of the raiser's Ractor,
    # and Ruby lets no other Ractor use the module's state.
    @main_watcher = nil

    class << self
      # Read in every Ractor; set in the main one (Ruby lets only the main
      # Ractor set a module's variables).
      attr_accessor :enabled

      # The calling Ractor's Watcher. A scheduler asks once, at creation,
      # and keeps it: a timeout costs no Ractor lookup.
      def for_this_ractor
        return @main_watcher ||= Watcher.new if Farce.main_ractor?

        Farce.ractor_local(:farce_held_alarms) { Watcher.new }
      end
    end

    # One Ractor's watcher thread and the schedulers it looks at.
    class Watcher
      def initialize
        @generation = nil
      end

      # Scheduler#timeout_after: scheduler's alarm is due in `seconds`.
      # Costs a clock read and a comparison unless the watcher must wake
      # earlier than it planned (its first alarm, or an earlier one).
      def watch(scheduler, seconds)
        return unless HeldAlarms.enabled

        reset unless @generation == RubyLoop.fork_generation
        due = monotonic + seconds + GRACE
        # before the comparison: a look that starts from now on sees it
        @schedulers[scheduler] = scheduler unless @schedulers.key?(scheduler)
        return if due >= @armed

        @mutex.synchronize do
          if due < @armed
            @armed = due
            @wake.signal
          end
          start unless @thread&.alive?
        end
        nil
      rescue ThreadError
        # in a trap handler (no Mutex there), or no thread to be had: this
        # alarm is the loop's alone, as before
        nil
      end

      private

      # The first alarm of this watcher, or of a forked child (the parent's
      # watcher thread, mutex and schedulers are not the child's).
      def reset
        @generation = RubyLoop.fork_generation
        # weak: a scheduler dropped without close is still collected (and
        # its core freed by the GC); a closed one has no alarms to look at.
        # Each scheduler is its own value, and the look reads the values:
        # Ruby 3.1's WeakMap checks only an entry's value for liveness, and
        # its #keys handed the look schedulers already collected (true as
        # the value: a crash at the look's call, with singleton classes).
        @schedulers = ObjectSpace::WeakMap.new
        @mutex = Thread::Mutex.new
        @wake = Thread::ConditionVariable.new
        @armed = NEVER # when the watcher looks next (NEVER while it looks: every alarm then wakes it)
        @thread = nil
      end

      # As Timeout's own thread: in the default group (a group the caller
      # enclosed keeps it), and marked as one that lives on by design, which
      # Ruby's test harness does not count as a leaked thread. (Another
      # Ractor's threads start in that Ractor's own default group, and
      # ThreadGroup::Default is the main Ractor's.)
      def start
        @thread = Thread.new { watch_loop }
        @thread.name = "farce-timeouts"
        @thread.report_on_exception = false
        ThreadGroup::Default.add(@thread) if Farce.main_ractor? && !@thread.group.enclosed?
        @thread.thread_variable_set(:"\0__detached_thread__", true)
      end

      def watch_loop
        loop do
          @mutex.synchronize { @armed = NEVER }
          found = look
          @mutex.synchronize do
            # an alarm registered during the look lowered @armed: it counts
            @armed = found if found < @armed
            delay = @armed - monotonic
            @wake.wait(@mutex, @armed == NEVER ? nil : delay) if delay.positive?
          end
        end
      end

      # Every scheduler that had alarms raises those its fiber holds the
      # thread past; the earliest time anything is left to look at (NEVER
      # if nothing is). A closed scheduler answers nil: no alarms left.
      def look
        now = monotonic
        earliest = NEVER
        @schedulers.values.each do |scheduler|
          delay = scheduler.__send__(:__raise_held_alarms, GRACE)
          earliest = [earliest, now + delay].min if delay
        rescue StandardError
          # a broken exception class, a scheduler released meanwhile: the
          # loop raises (or drops) that alarm itself; look again soon
          earliest = [earliest, now + GRACE].min
        end
        earliest
      end

      def monotonic
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end
