# frozen_string_literal: true

module Farce
  class RubyLoop
    # Counts forks (Farce::AfterFork, lib/farce/fork.rb, calls forked in each
    # child) so that a scheduler inherited by a child can tell it is inert
    # there without a getpid per hook.
    @fork_generation = 0
    # Counts IO#reopen calls (lib/farce/reopen_notice.rb): after one, each
    # descriptor's next wait looks at its open file again (claim_descriptor).
    # The main Ractor's count; another Ractor counts its own reopens in its
    # own storage (Ruby lets only the main Ractor set a module's variables),
    # and its loops add the two (reopens_here).
    @reopens = 0
    class << self
      attr_reader :fork_generation, :reopens

      # Only the main Ractor forks from Ruby 4.0 on; before, a fork from
      # another Ractor is not counted (Ruby would refuse the update), and
      # the Ruby loop does not tell its inherited schedulers inert there.
      def forked
        @fork_generation += 1 if Farce.main_ractor?
      end

      def descriptors_reopened
        if Farce.main_ractor?
          @reopens += 1
        else
          Ractor.current[:farce_reopens] = Farce.ractor_local(:farce_reopens) { 0 } + 1
        end
      end

      # What a loop of a Ractor other than the main one compares: every
      # reopen it can know of (the main Ractor's and its own).
      def reopens_here
        @reopens + Farce.ractor_local(:farce_reopens) { 0 }
      end

      # Makes Farce::Scheduler route its hook methods to a RubyLoop for the
      # schedulers that have one (Hooks). Done once, at the first such
      # scheduler: until then a native scheduler's hooks are the C methods
      # with no Ruby frame in between.
      def install
        return if Farce::Scheduler.ancestors.include?(Hooks)

        Farce::Scheduler.prepend(Hooks)
      end
    end

    # Prepended to Farce::Scheduler: each hook method goes to the
    # scheduler's RubyLoop when it has one, else to the native method (the
    # C method that Farce::Scheduler defines). A subclass that overrides a
    # hook and calls super reaches this, so it works on either loop.
    module Hooks
      def run = (ruby_loop = @ruby_loop) ? ruby_loop.run : super
      def closed? = (ruby_loop = @ruby_loop) ? ruby_loop.closed? : super
      def backend = (ruby_loop = @ruby_loop) ? ruby_loop.backend : super
      def fallback_reason = (ruby_loop = @ruby_loop) ? ruby_loop.fallback_reason : super
      def stats = (ruby_loop = @ruby_loop) ? ruby_loop.stats : super
      def io_wait(io, events, timeout) = (ruby_loop = @ruby_loop) ? ruby_loop.io_wait(io, events, timeout) : super
      def kernel_sleep(*duration) = (ruby_loop = @ruby_loop) ? ruby_loop.kernel_sleep(*duration) : super
      def block(*arguments) = (ruby_loop = @ruby_loop) ? ruby_loop.block(*arguments) : super
      def unblock(blocker, fiber) = (ruby_loop = @ruby_loop) ? ruby_loop.unblock(blocker, fiber) : super
      def yield = (ruby_loop = @ruby_loop) ? ruby_loop.yield : super
      def fiber_interrupt(fiber, exception) = (ruby_loop = @ruby_loop) ? ruby_loop.fiber_interrupt(fiber, exception) : super
      def io_close(io) = (ruby_loop = @ruby_loop) ? ruby_loop.io_close(io) : super
      # Process#wait's core step (Scheduler#process_wait): the Ruby loop has
      # no pidfd wait, so it answers :thread (a helper thread waits).
      def __process_wait(pid, flags) = @ruby_loop ? :thread : super

      if RubyLoop::SINGLE_TRANSFER
        # Ruby 4.1: io_read(io, buffer, offset, length), one transfer.
        def io_read(io, buffer, offset, length)
          (ruby_loop = @ruby_loop) ? ruby_loop.io_read_once(io, buffer, offset, length) : super
        end

        def io_write(io, buffer, offset, length)
          (ruby_loop = @ruby_loop) ? ruby_loop.io_write_once(io, buffer, offset, length) : super
        end
      else
        # Ruby 3.1 calls io_read(io, buffer, length), 3.2 to 4.0 add the offset.
        def io_read(io, buffer, length, *offset)
          (ruby_loop = @ruby_loop) ? ruby_loop.io_read(io, buffer, length, *offset) : super
        end

        def io_write(io, buffer, length, *offset)
          (ruby_loop = @ruby_loop) ? ruby_loop.io_write(io, buffer, length, *offset) : super
        end
      end

      private

      # Ruby 4.1's forms under their own names on every Ruby (tests).
      def __io_read_v4(io, buffer, offset, length)
        (ruby_loop = @ruby_loop) ? ruby_loop.io_read_once(io, buffer, offset, length) : super
      end

      def __io_write_v4(io, buffer, offset, length)
        (ruby_loop = @ruby_loop) ? ruby_loop.io_write_once(io, buffer, offset, length) : super
      end

      def __release = (ruby_loop = @ruby_loop) ? ruby_loop.release : super
      def __fiber_started = (ruby_loop = @ruby_loop) ? ruby_loop.fiber_started : super
      def __fiber_finished = (ruby_loop = @ruby_loop) ? ruby_loop.fiber_finished : super
      def __offload(delta) = (ruby_loop = @ruby_loop) ? ruby_loop.offload(delta) : super
      def __select_ready(io, events) = (ruby_loop = @ruby_loop) ? ruby_loop.select_ready(io, events) : super

      def __alarm(fiber, seconds, exception_class, arguments)
        (ruby_loop = @ruby_loop) ? ruby_loop.alarm(fiber, seconds, exception_class, arguments) : super
      end

      def __cancel_alarm(token) = (ruby_loop = @ruby_loop) ? ruby_loop.cancel_alarm(token) : super
      def __raise_held_alarms(grace) = (ruby_loop = @ruby_loop) ? ruby_loop.raise_held_alarms(grace) : super
      def __turn_check = (ruby_loop = @ruby_loop) ? ruby_loop.turn_check : super
      def __start(fiber) = (ruby_loop = @ruby_loop) ? ruby_loop.start(fiber) : super
      def __parked_fibers = (ruby_loop = @ruby_loop) ? ruby_loop.parked_fibers : super
      def __unwind_turn = (ruby_loop = @ruby_loop) ? ruby_loop.unwind_turn : super
      def __stall_threshold=(seconds)
        (ruby_loop = @ruby_loop) ? ruby_loop.watch_stalls(seconds, self) : super
      end

      def __turn_budget=(seconds)
        (ruby_loop = @ruby_loop) ? ruby_loop.turn_budget = seconds : super
      end
    end
  end
end
