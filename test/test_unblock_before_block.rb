# frozen_string_literal: true

require_relative "test_helper"

# Another thread's `unblock` of a fiber that is just about to `block`.
# Thread#join (and Queue, Mutex) list the fiber as waiting before they call
# the scheduler's `block`; the thread that ends (or pushes, or unlocks) then
# calls `unblock`, and under the GVL it may lose the lock at any method call
# in the Ruby loop's `unblock`. When it lost it after finding no wait for the
# fiber, but before noting the wakeup as early, the fiber registered its wait,
# found no early wakeup, and parked for good: test_wait_stress's eof_on_close
# hung once in `Thread.new { w.close }.join` (a loaded CI machine, 1 run in
# many). Here that switch is forced: the unblocking thread stops in the
# fiber's `alive?` (a method call the loop's unblock made right after its
# look-up) until the fiber has parked.
class TestUnblockBeforeBlock < Minitest::Test
  def test_unblock_from_another_thread_racing_the_block_is_not_lost
    woken = nil
    Timeout.timeout(30) do
      Farce.run(backend: backend) do
        scheduler = Fiber.scheduler
        in_unblock = false # the thread is inside unblock, past its look-up
        parked = false     # the fiber has parked in block
        Fiber.schedule do
          target = Fiber.current
          alive = Fiber.instance_method(:alive?)
          target.singleton_class.define_method(:alive?) do
            if Thread.current[:pause_in_unblock] && !in_unblock
              in_unblock = true
              Thread.pass until parked # the fiber registers its wait and parks meanwhile
            end
            alive.bind_call(self)
          end
          thread = Thread.new do
            Thread.current[:pause_in_unblock] = true
            scheduler.unblock(:blocker, target)
            in_unblock = true # an unblock that asked nothing of the fiber
          end
          Thread.pass until in_unblock
          # 2 s: the wakeup is lost if this times out (false) instead of
          # returning true at once
          woken = scheduler.block(:blocker, 2)
          thread.join
        end
        Fiber.schedule { parked = true } # runs once the target has parked
      end
    end
    assert_equal true, woken, "the unblock from another thread was lost: block timed out"
  end

  # A timeout with a Ruby-defined to_f: converting it runs Ruby code, during
  # which another thread may unblock the fiber. Here the conversion itself
  # unblocks it, as that thread would: the fiber is not parked yet, so the
  # wakeup is noted as early, and block must find it after the conversion.
  class UnblockingTimeout < Numeric
    def initialize(&during_to_f)
      super()
      @during_to_f = during_to_f
    end

    def to_f
      @during_to_f.call
      2.0
    end
  end

  def test_an_unblock_while_the_timeout_converts_is_not_lost
    woken = nil
    Timeout.timeout(30) do
      Farce.run(backend: backend) do
        scheduler = Fiber.scheduler
        Fiber.schedule do
          target = Fiber.current
          # 2 s: the wakeup is lost if this times out (false)
          woken = scheduler.block(:blocker, UnblockingTimeout.new { scheduler.unblock(:blocker, target) })
        end
      end
    end
    assert_equal true, woken, "the unblock during the timeout's to_f was lost: block timed out"
  end
end
