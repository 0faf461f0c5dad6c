# frozen_string_literal: true

module Farce
  class RubyCore
    # Counts forks (Farce::AfterFork, lib/farce/fork.rb, calls forked in each
    # child) so that a scheduler inherited by a child can tell it is inert
    # there without a getpid per hook.
    @fork_generation = 0
    class << self
      attr_reader :fork_generation

      def forked
        @fork_generation += 1
      end

      # Makes Farce::Scheduler route its core methods to a RubyCore for the
      # schedulers that have one (Hooks). Done once, at the first such
      # scheduler: until then a native scheduler's hooks are the C methods
      # with no Ruby frame in between.
      def install
        return if Farce::Scheduler.ancestors.include?(Hooks)

        Farce::Scheduler.prepend(Hooks)
      end
    end

    # Prepended to Farce::Scheduler: each core method goes to the
    # scheduler's RubyCore when it has one, else to the native method (the
    # C method that Farce::Scheduler defines). A subclass that overrides a
    # hook and calls super reaches this, so it works on either core.
    module Hooks
      def run = (core = @ruby_core) ? core.run : super
      def closed? = (core = @ruby_core) ? core.closed? : super
      def backend = (core = @ruby_core) ? core.backend : super
      def fallback_reason = (core = @ruby_core) ? core.fallback_reason : super
      def stats = (core = @ruby_core) ? core.stats : super
      def io_wait(io, events, timeout) = (core = @ruby_core) ? core.io_wait(io, events, timeout) : super
      def kernel_sleep(*duration) = (core = @ruby_core) ? core.kernel_sleep(*duration) : super
      def block(*arguments) = (core = @ruby_core) ? core.block(*arguments) : super
      def unblock(blocker, fiber) = (core = @ruby_core) ? core.unblock(blocker, fiber) : super
      def yield = (core = @ruby_core) ? core.yield : super
      def fiber_interrupt(fiber, exception) = (core = @ruby_core) ? core.fiber_interrupt(fiber, exception) : super
      def io_close(io) = (core = @ruby_core) ? core.io_close(io) : super
      # Process#wait's core step (Scheduler#process_wait): the Ruby core has
      # no pidfd wait, so it answers :thread (a helper thread waits).
      def __process_wait(pid, flags) = @ruby_core ? :thread : super

      if RubyCore::SINGLE_TRANSFER
        # Ruby 4.1: io_read(io, buffer, offset, length), one transfer.
        def io_read(io, buffer, offset, length)
          (core = @ruby_core) ? core.io_read_once(io, buffer, offset, length) : super
        end

        def io_write(io, buffer, offset, length)
          (core = @ruby_core) ? core.io_write_once(io, buffer, offset, length) : super
        end
      else
        # Ruby 3.1 calls io_read(io, buffer, length), 3.2 to 4.0 add the offset.
        def io_read(io, buffer, length, *offset)
          (core = @ruby_core) ? core.io_read(io, buffer, length, *offset) : super
        end

        def io_write(io, buffer, length, *offset)
          (core = @ruby_core) ? core.io_write(io, buffer, length, *offset) : super
        end
      end

      private

      # Ruby 4.1's forms under their own names on every Ruby (tests).
      def __io_read_v4(io, buffer, offset, length)
        (core = @ruby_core) ? core.io_read_once(io, buffer, offset, length) : super
      end

      def __io_write_v4(io, buffer, offset, length)
        (core = @ruby_core) ? core.io_write_once(io, buffer, offset, length) : super
      end

      def __release = (core = @ruby_core) ? core.release : super
      def __fiber_started = (core = @ruby_core) ? core.fiber_started : super
      def __fiber_finished = (core = @ruby_core) ? core.fiber_finished : super
      def __offload(delta) = (core = @ruby_core) ? core.offload(delta) : super
      def __select_ready(io, events) = (core = @ruby_core) ? core.select_ready(io, events) : super

      def __alarm(fiber, seconds, exception_class, arguments)
        (core = @ruby_core) ? core.alarm(fiber, seconds, exception_class, arguments) : super
      end

      def __cancel_alarm(token) = (core = @ruby_core) ? core.cancel_alarm(token) : super
      def __turn_check = (core = @ruby_core) ? core.turn_check : super
      def __start(fiber) = (core = @ruby_core) ? core.start(fiber) : super
      def __parked_fibers = (core = @ruby_core) ? core.parked_fibers : super
      def __unwind_turn = (core = @ruby_core) ? core.unwind_turn : super
      def __stall_threshold=(seconds)
        (core = @ruby_core) ? core.watch_stalls(seconds, self) : super
      end

      def __turn_budget=(seconds)
        (core = @ruby_core) ? core.turn_budget = seconds : super
      end
    end
  end
end
