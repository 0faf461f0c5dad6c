# frozen_string_literal: true

require_relative "test_helper"

# fiber_interrupt's first argument on Ruby 4.1 (ruby/ruby#18793) may be an
# object standing for one blocking operation rather than the Fiber: it
# answers only alive? (the operation is still going on), raise (into its
# fiber, while it is) and transfer. No Ruby on this machine passes one yet,
# so the tests hand the hook such an object, as Ruby 4.1 will.
class TestInterruptTargets < Minitest::Test
  # What Ruby 4.1 passes, reduced to its interface: harmless once the
  # operation is over.
  class Operation
    attr_reader :raised

    def initialize(fiber)
      @fiber = fiber
      @active = true
      @raised = 0
    end

    def finish = @active = false
    def alive? = @active && @fiber.alive?

    def raise(*arguments)
      return unless alive?

      @raised += 1
      @fiber.raise(*arguments)
    end

    def transfer = ::Kernel.raise(NotImplementedError, "farce's scheduler resumes, it does not transfer")
  end

  def test_an_operation_target_raises_in_its_blocked_fiber
    error = nil
    operation = nil
    farce do
      r, _w = IO.pipe
      reader = Fiber.schedule do
        r.read(1)
      rescue IOError => e
        error = e
      end
      operation = Operation.new(reader)
      assert_nil Fiber.scheduler.fiber_interrupt(operation, IOError.new("stream closed in another thread"))
    end
    assert_equal "stream closed in another thread", error&.message
    assert_equal 1, operation.raised
  end

  def test_an_operation_that_ended_is_left_alone
    woke = nil
    operation = nil
    farce do
      q = Thread::Queue.new
      waiter = Fiber.schedule { woke = q.pop }
      operation = Operation.new(waiter)
      operation.finish # between the hook's call and the loop's turn
      Fiber.scheduler.fiber_interrupt(operation, RuntimeError)
      Fiber.schedule { q << :pushed }
    end
    assert_equal :pushed, woke
    assert_equal 0, operation.raised
  end

  def test_an_operation_target_from_another_thread_wakes_the_loop
    error = nil
    farce do
      sleeper = Fiber.schedule do
        sleep 10
      rescue RuntimeError => e
        error = e
      end
      scheduler = Fiber.scheduler
      operation = Operation.new(sleeper)
      Thread.new { sleep 0.02; scheduler.fiber_interrupt(operation, RuntimeError.new("from a thread")) }.join
    end
    assert_equal "from a thread", error&.message
  end

  def test_a_target_without_the_interface_is_a_type_error
    farce do
      assert_raises(TypeError) { Fiber.scheduler.fiber_interrupt(:not_a_fiber, RuntimeError) }
      half = Object.new
      def half.alive? = true
      def half.raise(*) = nil
      assert_raises(TypeError) { Fiber.scheduler.fiber_interrupt(half, RuntimeError) } # no transfer
    end
  end
end
