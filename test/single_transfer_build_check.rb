# frozen_string_literal: true

# Run by `rake test:single_transfer` against a build made with Ruby 4.1's
# interface versions (see rakelib/single_transfer.rake), not by the suite:
# the hook names themselves are bound in their 4.1 form there. No scheduler
# is set (this Ruby would call them in its own, older order), so the hooks
# are called by hand from the thread's own fiber, where they never park.
require "farce"
require "minitest/autorun"
require "tempfile"

class SingleTransferBuildCheck < Minitest::Test
  EAGAIN = -Errno::EAGAIN::Errno

  def setup
    Warning[:experimental] = false # IO::Buffer's warning
    skip "not a build with Ruby 4.1's interface versions" unless Farce::SINGLE_TRANSFER_HOOKS
  end

  def backends
    (Farce.backends - [:auto]) + [:ruby]
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
end
