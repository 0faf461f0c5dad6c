# frozen_string_literal: true

# Run by `rake test:single_transfer` against a build made with Ruby 4.1's
# interface versions (see rakelib/single_transfer.rake), not by the suite:
# the hook names themselves are bound in their 4.1 form there. This Ruby
# would call them in its own, older order, so no Ruby IO runs under a
# scheduler here: the hooks are called by hand, from the thread's own fiber
# (where they never park) and from fibers that may park on a completion
# operation (io_uring), whose data comes from the blocking main fiber.
require "farce"
require "minitest/autorun"
require "tempfile"

class SingleTransferBuildCheck < Minitest::Test
  EAGAIN = -Errno::EAGAIN::Errno

  def setup
    Warning[:experimental] = false # IO::Buffer's warning
    return if Farce::SINGLE_TRANSFER_HOOKS
    # the rake task built it so: not a reason to skip there
    flunk "farce was not built with Ruby 4.1's hook forms" if ENV["FARCE_SINGLE_TRANSFER_BUILD"] == "1"
    skip "not a build with Ruby 4.1's interface versions"
  end

  def uring?(loop) = loop.stats[:completion_ops]

  def backends
    (Farce.backends - [:auto]).select do |name|
      Farce::Scheduler.new(backend: name).close
      true
    rescue Farce::Error
      false # not on this kernel
    end + [:ruby]
  end

  def test_the_hook_names_have_the_4_1_form
    assert_equal 4, Farce::Scheduler.instance_method(:io_read).arity
    assert_equal 4, Farce::Scheduler.instance_method(:io_write).arity
    assert_equal 5, Farce::IOEventSelector.instance_method(:io_read).arity
    assert_equal 6, Farce::IOEventSelector.instance_method(:io_pread).arity
    assert Farce::RubyLoop::SINGLE_TRANSFER, "the Ruby loop follows the build"
  end

  def test_scheduler_hooks_on_every_backend
    backends.each do |backend|
      scheduler = Farce::Scheduler.new(backend: backend)
      r, w = IO.pipe
      buffer = IO::Buffer.new(8)
      assert_equal EAGAIN, scheduler.io_read(r, buffer, 0, 4), backend
      w.write("abcdef")
      assert_equal 3, scheduler.io_read(r, buffer, 2, 3), backend
      assert_equal "\0\0abc".b, buffer.get_string(0, 5)
      assert_equal 0, scheduler.io_read(r, buffer, 0, 0)
      buffer.set_string("XY", 0)
      assert_equal 2, scheduler.io_write(w, buffer, 0, 2)
      assert_equal "defXY", r.read_nonblock(16)
      refute buffer.locked?, "#{backend}: every hold given back"
      buffer.resize(16)
    ensure
      scheduler&.close
    end
  end

  def test_positional_hooks
    scheduler = Farce::Scheduler.new
    Tempfile.create("farce") do |file|
      file.write("hello")
      file.flush
      buffer = IO::Buffer.new(4)
      assert_equal 3, scheduler.io_pread(file, buffer, 1, 0, 3)
      assert_equal "ell", buffer.get_string(0, 3)
      assert_equal 1, scheduler.io_pwrite(file, buffer, 0, 1, 1)
      assert_equal "lello", File.read(file.path)
      refute buffer.locked?
    end
  ensure
    scheduler&.close
  end

  def test_selector_hooks
    selector = Farce::IOEventSelector.new(Fiber.current)
    r, w = IO.pipe
    buffer = IO::Buffer.new(8)
    w.write("xyz")
    assert_equal 2, selector.io_read(Fiber.current, r, buffer, 1, 2)
    assert_equal "\0xy".b, buffer.get_string(0, 3)
    assert_equal 1, selector.io_read(Fiber.current, r, buffer, 0, 4)
    assert_equal EAGAIN, selector.io_read(Fiber.current, r, buffer, 0, 4)
    refute buffer.locked?
  ensure
    selector&.close
  end

  # Counted locks (IO::Buffer version 3): the hook takes its own next to
  # the owner's. Where this Ruby's locks are one flag, the owner's lock
  # cannot be taken twice: the build assumes counting, so that is skipped.
  def test_a_buffer_its_owner_locked
    buffer = IO::Buffer.new(4)
    counted = begin
      buffer.locked { buffer.locked { true } }
    rescue IO::Buffer::LockedError
      false
    end
    skip "this Ruby's IO::Buffer locks are one flag" unless counted

    scheduler = Farce::Scheduler.new
    r, w = IO.pipe
    w.write("q")
    buffer.locked do
      assert_equal 1, scheduler.io_read(r, buffer, 0, 4)
      assert buffer.locked?
    end
    refute buffer.locked?
  ensure
    scheduler&.close
  end
  # A read that finds nothing: on io_uring a fiber that can park waits for
  # one operation of exactly the asked range (the transfer Ruby 4.1 asks
  # for, io-event's too); every other backend answers -EAGAIN at once and
  # leaves the wait to Ruby's io_wait. The buffer stays held until the
  # kernel is done with it.
  def test_a_read_that_finds_nothing_from_a_fiber_that_can_park
    backends.each do |backend|
      scheduler = Farce::Scheduler.new(backend: backend)
      r, w = IO.pipe
      buffer = IO::Buffer.new(8)
      result = nil
      locked_while_parked = nil
      Fiber.set_scheduler(scheduler)
      Fiber.schedule { result = scheduler.io_read(r, buffer, 2, 3) }
      uring = backend != :ruby && uring?(scheduler)
      if uring
        assert_nil result, "#{backend}: the fiber waits for its operation"
        locked_while_parked = buffer.locked?
      else
        assert_equal EAGAIN, result, backend
      end
      w.write("abcdef") # the main fiber is blocking: no hook
      Fiber.set_scheduler(nil) # runs the loop to the end
      next unless uring

      assert locked_while_parked, "#{backend}: held while the kernel may write into it"
      assert_equal 3, result, "#{backend}: at most `length` bytes, at `offset`"
      assert_equal "\0\0abc".b, buffer.get_string(0, 5)
      assert_equal "def", r.read_nonblock(8), "#{backend}: nothing beyond the range was read"
      refute buffer.locked?
    ensure
      Fiber.set_scheduler(nil)
      [r, w].each { |io| io&.close }
    end
  end

  # The selector: a fiber that is not the loop's parks on the operation
  # (io-event's own interface 4 tests do the same); the loop fiber itself
  # gets -EAGAIN.
  def test_selector_read_from_a_child_fiber
    selector = Farce::IOEventSelector.new(Fiber.current)
    r, w = IO.pipe
    buffer = IO::Buffer.new(8)
    assert_equal EAGAIN, selector.io_read(Fiber.current, r, buffer, 0, 4), "the loop fiber never parks"
    result = nil
    reader = Fiber.new { result = selector.io_read(Fiber.current, r, buffer, 1, 2) }
    reader.transfer
    if uring?(selector)
      assert_nil result, "parked on its operation"
      w.write("xyz")
      selector.select(5) while result.nil? && reader.alive?
      assert_equal 2, result
      assert_equal "\0xy".b, buffer.get_string(0, 3)
      assert_equal "z", r.read_nonblock(4)
    else
      assert_equal EAGAIN, result
    end
    refute buffer.locked?
  ensure
    selector&.close
  end

  # A write to a full pipe: on io_uring one operation, which completes
  # with what the kernel took once the reader made room.
  def test_a_write_to_a_full_pipe
    backends.each do |backend|
      scheduler = Farce::Scheduler.new(backend: backend)
      r, w = IO.pipe
      w.write_nonblock("x" * 65_536) rescue IO::WaitWritable # fill it
      loop { w.write_nonblock("x" * 4096) } rescue IO::WaitWritable
      buffer = IO::Buffer.for("hello".b)
      result = nil
      Fiber.set_scheduler(scheduler)
      Fiber.schedule { result = scheduler.io_write(w, buffer, 1, 3) }
      uring = backend != :ruby && uring?(scheduler)
      assert_equal EAGAIN, result, backend unless uring
      drained = +""
      drained << r.read_nonblock(1 << 20) while drained.bytesize < 65_536
      Fiber.set_scheduler(nil)
      next unless uring

      assert_equal 3, result, backend
      rest = +""
      loop { rest << r.read_nonblock(1 << 20) } rescue IO::WaitReadable
      assert rest.end_with?("ell"), "#{backend}: the range [1, 3] was written"
    ensure
      Fiber.set_scheduler(nil)
      [r, w].each { |io| io&.close }
    end
  end

  # Closing the IO while a fiber is parked on its read: the operation is
  # cancelled, the fiber gets IOError (as from a readiness wait), the
  # buffer is given back.
  def test_closing_the_io_under_a_parked_read
    scheduler = uring_scheduler
    r, w = IO.pipe
    buffer = IO::Buffer.new(8)
    error = nil
    Fiber.set_scheduler(scheduler)
    Fiber.schedule do
      scheduler.io_read(r, buffer, 0, 4)
    rescue IOError => e
      error = e
    end
    Fiber.schedule { r.close } # io_close from a fiber: the loop cancels the operation
    Fiber.set_scheduler(nil)
    assert_kind_of IOError, error
    refute buffer.locked?
  ensure
    Fiber.set_scheduler(nil)
    w&.close
  end

  # Ruby 4.1 may hand fiber_interrupt an object standing for the blocked
  # operation (alive?, raise, transfer) instead of the Fiber: it reaches
  # the fiber parked on the operation, and the buffer is given back once
  # the kernel let go of it.
  class Operation
    def initialize(fiber) = @fiber = fiber
    def alive? = @fiber.alive?
    def raise(*arguments) = @fiber.raise(*arguments)
    def transfer = ::Kernel.raise(NotImplementedError, "farce's scheduler resumes, it does not transfer")
  end

  def test_fiber_interrupt_with_an_operation_stand_in
    backends.each do |backend|
      scheduler = Farce::Scheduler.new(backend: backend)
      r, w = IO.pipe
      buffer = IO::Buffer.new(8)
      error = nil
      Fiber.set_scheduler(scheduler)
      reader = Fiber.schedule do
        result = scheduler.io_read(r, buffer, 0, 4)
        # not io_uring: Ruby's part, the wait for readiness, by hand
        scheduler.io_wait(r, IO::READABLE, nil) if result == EAGAIN
      rescue IOError => e
        error = e
      end
      assert_nil scheduler.fiber_interrupt(Operation.new(reader), IOError.new("closed in another thread"))
      Fiber.set_scheduler(nil)
      assert_equal "closed in another thread", error&.message, backend
      refute buffer.locked?, backend
      w.write("q")
      assert_equal "q", r.read_nonblock(4), "#{backend}: the cancelled read consumed nothing"
    ensure
      Fiber.set_scheduler(nil)
      [r, w].each { |io| io&.close }
    end
  end

  # read_nonblock under a scheduler must never wait, whatever Ruby passes
  # the hook: the method that called it is asked, as on Ruby 3.x.
  def test_a_nonblocking_method_gets_eagain_not_an_operation
    scheduler = uring_scheduler
    r, w = IO.pipe
    result = nil
    Fiber.set_scheduler(scheduler)
    Fiber.schedule { result = hook_read_nonblock(scheduler, r) }
    assert_equal EAGAIN, result
    Fiber.set_scheduler(nil)
  ensure
    Fiber.set_scheduler(nil)
    [r, w].each { |io| io&.close }
  end

  # its name ends in _nonblock, as IO#read_nonblock's does
  def hook_read_nonblock(scheduler, io) = scheduler.io_read(io, IO::Buffer.new(4), 0, 4)

  # A scheduler on io_uring with completion operations, or a skip saying
  # this kernel offers none (rakelib/single_transfer.rake allows that skip
  # only there).
  def uring_scheduler
    scheduler = Farce::Scheduler.new(backend: :io_uring)
    return scheduler if uring?(scheduler)

    scheduler.close
    skip "io_uring's completion operations are not offered here"
  rescue Farce::Error, ArgumentError
    skip "io_uring's completion operations are not offered here"
  end
end
