# frozen_string_literal: true

# Stands in for Ruby's own test/fiber/scheduler.rb (the reference scheduler
# its test/fiber suite runs against) so that the suite runs against farce.
# The runner (test/ruby_fiber/run.rb) puts the Ruby version's test files in a
# directory whose scheduler.rb loads this file: the tests' `require_relative
# 'scheduler'` (and `require 'scheduler'` in their child processes) get these
# classes instead of the reference ones.
#
# Every class here is Farce::Scheduler with farce's own hooks, on the backend
# FARCE_BACKEND names (the Ruby loop with FARCE_BACKEND=ruby). What the
# reference file adds for the tests maps onto farce's public API:
#
# - Scheduler, IOBufferScheduler: Farce::Scheduler itself. The reference
#   Scheduler has no io_read/io_write (Ruby then reads through io_wait) and
#   IOBufferScheduler adds IO::Buffer ones; farce always has its own
#   io_read/io_write (IO::Buffer based), so both names are the scheduler an
#   application gets.
# - IOScheduler, IOErrorScheduler, BrokenUnblockScheduler,
#   SleepingUnblockScheduler, SleepingBlockingScheduler: the reference's test
#   doubles, each the same override on farce's public hook (`super` is
#   farce's hook where the reference calls its own).
# - Scheduler#waiting: the reference's table of fibers parked with a
#   deadline; only its size is used (test_sleep: five fibers in sleep()).
#   farce's public count of parked fibers, stats[:parked_fibers], answers
#   it; every parked fiber in that test is a sleeping one.
# - Scheduler#transfer (3.4+): in the reference, the running fiber transfers
#   to the fiber that runs the loop, and nothing will resume it. farce runs
#   a scheduled fiber with resume, so that is Fiber.yield: control goes back
#   to the loop (or to Fiber.schedule's caller) with no wake-up arranged.
#
# Nothing here changes what a test asserts; tests left out (if any) are
# listed, with their reason, in run.rb and in its output.

$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "farce"
require "socket"
begin
  require "io/nonblock"
rescue LoadError
  nil
end

class Scheduler < Farce::Scheduler
  # The reference's table of waiting fibers; the tests ask only its size.
  Waiting = Struct.new(:size)

  def waiting
    Waiting.new(stats.fetch(:parked_fibers))
  end

  def transfer
    Fiber.yield
  end
end

class IOBufferScheduler < Scheduler
end

# Records each io_write Ruby makes (descriptor and bytes handed over) before
# farce writes them.
class IOScheduler < Scheduler
  def operations
    @operations ||= []
  end

  def io_write(io, buffer, *rest)
    operations << [:io_write, io.fileno, buffer.get_string]
    super
  end
end

# Hooks that fail: Ruby must raise the errno they return.
class IOErrorScheduler < Scheduler
  def io_read(*)
    -Errno::EBADF::Errno
  end

  def io_write(*)
    -Errno::EINVAL::Errno
  end
end

# unblock that raises after doing its job.
class BrokenUnblockScheduler < Scheduler
  def unblock(blocker, fiber)
    super
    raise "Broken unblock!"
  end
end

# unblock that sleeps after doing its job (changes the calling thread's state).
class SleepingUnblockScheduler < Scheduler
  def unblock(blocker, fiber)
    super
    sleep(0.1)
  end
end

# kernel_sleep that first sleeps blocking, then parks as usual.
class SleepingBlockingScheduler < Scheduler
  def kernel_sleep(*)
    Fiber.blocking { sleep 0.0001 }
    super
  end
end
