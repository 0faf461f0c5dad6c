# frozen_string_literal: true

require_relative "test_helper"

# Ruby 4.0 calls fiber_interrupt, yield, io_close(fd) and io_write (for a
# buffer flush) itself, and a child it forks starts with no scheduler.
# test_ruby40_hooks.rb calls the hooks directly (which any Ruby can); here
# Ruby makes the calls, and a spy on the scheduler checks that it did.
class TestRuby40HooksCalledByRuby < Minitest::Test
  RUBY40 = RUBY_VERSION >= "4.0"

  # Records the hooks Ruby calls on one scheduler (prepended to its
  # singleton class), then lets them run.
  module Spy
    %i[fiber_interrupt io_close io_write yield].each do |hook|
      define_method(hook) do |*args|
        (@spied ||= []) << [hook, *args.map { |a| a.is_a?(IO::Buffer) ? a.size : a }]
        super(*args)
      end
    end

    def spied(hook)
      (@spied || []).select { |call| call.first == hook }
    end
  end

  def spy_on_scheduler
    Fiber.scheduler.singleton_class.prepend(Spy)
    Fiber.scheduler
  end

  def skip_before_ruby40(what)
    skip "Ruby #{RUBY_VERSION} does not call #{what} (Ruby 4.0 does)" unless RUBY40
  end

  # IO#close runs thread_io_close_notify_all: each fiber blocked on the IO
  # gets the "stream closed in another thread" IOError through fiber_interrupt.
  def test_closing_an_io_interrupts_the_fiber_reading_it_through_fiber_interrupt
    skip_before_ruby40("fiber_interrupt when an IO is closed")
    error = nil
    reader = nil
    scheduler = nil
    farce do
      scheduler = spy_on_scheduler
      r, w = IO.pipe
      reader = Fiber.schedule do
        r.read(1)
      rescue IOError => e
        error = e
      end
      r.close # from another fiber of the same thread
      sleep 0.01 until error
      w.close
    end
    assert_kind_of IOError, error
    assert_match(/stream closed/, error.message)
    calls = scheduler.spied(:fiber_interrupt)
    assert_equal 1, calls.size, "Ruby calls fiber_interrupt once, for the one blocked fiber"
    assert_same reader, calls[0][1]
    assert_kind_of IOError, calls[0][2]
  end

  # A signal that interrupts a blocking call in a fiber (flock(2) here, which
  # has no hook: the whole thread waits in it) runs its trap handler, and
  # then Ruby 4.0 calls yield (vm_check_ints_blocking), so other fibers get a
  # turn before the call is retried.
  def test_a_signal_during_a_blocking_call_in_a_fiber_calls_yield
    skip_before_ruby40("yield after a signal")
    skip "no flock here" unless File.respond_to?(:open) && File::Constants.const_defined?(:LOCK_EX)

    require "tempfile"
    file = Tempfile.new("farce-yield")
    holder = File.open(file.path, "r")
    holder.flock(File::LOCK_EX)
    trapped = 0
    previous = trap(:USR1) { trapped += 1 }
    scheduler = nil
    locked = false
    farce do
      scheduler = spy_on_scheduler
      helper = Thread.new do
        sleep 0.1
        Process.kill(:USR1, Process.pid)
        sleep 0.1
        holder.flock(File::LOCK_UN)
      end
      Fiber.schedule { File.open(file.path, "r") { |f| locked = f.flock(File::LOCK_EX) } }
      helper.join
    end
    assert_equal 0, locked
    assert_equal 1, trapped
    refute_empty scheduler.spied(:yield), "Ruby did not call yield after the trap ran"
  ensure
    trap(:USR1, previous || "DEFAULT") unless trapped.nil? # (nil: skipped before the trap was set)
    holder&.close
    file&.close!
  end

  # IO#close asks the scheduler to close the raw descriptor (an Integer);
  # farce answers nil and Ruby closes it.
  def test_io_close_gets_the_raw_descriptor_and_ruby_closes_it
    skip_before_ruby40("io_close(fd)")
    scheduler = nil
    fd = nil
    farce do
      scheduler = spy_on_scheduler
      r, w = IO.pipe
      fd = r.fileno
      Fiber.schedule { r.close }
      w.close
    end
    # (w.close, on the scheduler's thread too, is another call)
    assert_includes scheduler.spied(:io_close), [:io_close, fd]
    refute File.exist?("/proc/self/fd/#{fd}"), "descriptor #{fd} is still open" if File.directory?("/proc/self/fd")
  end

  # Ruby 4.0 flushes a write buffer through io_write, in the writing fiber,
  # holding the IO's write lock: the Ruby loop's write_nonblock on that IO
  # deadlocked on the lock (it flushes the buffer first). The bytes arrive
  # once each, in order, on every backend; on 4.0 the spy sees the flush.
  def test_a_buffered_write_is_flushed_through_io_write
    got = nil
    writer_error = nil
    scheduler = nil
    farce do
      scheduler = spy_on_scheduler
      r, w = IO.pipe
      reader = Fiber.schedule { got = r.read }
      w.sync = false # IO.pipe's writer is sync: buffer like a File or a piped $stdout
      Fiber.schedule do
        w.write("head")        # buffered
        w.write("x" * 200_000) # the buffer is flushed, then this goes past the pipe's capacity: waits
        w.print("tail")        # buffered again
        w.flush
      rescue StandardError => e
        writer_error = e # (an error in a scheduled fiber is only printed)
      ensure
        w.close
      end
      sleep 0.001 while reader.alive?
      r.close
    end
    assert_nil writer_error
    assert_equal "head" + ("x" * 200_000) + "tail", got
    return unless RUBY40

    sizes = scheduler.spied(:io_write).map { |call| call[2] } # [:io_write, io, buffer size, length, offset]
    assert_includes sizes, 4, "the flush of the 4 buffered bytes went through io_write"
  end

  # The plain case: two buffered writes, then IO#flush (before the fix the
  # Ruby loop's flush hung here: the syscall fiber waited for the lock).
  def test_flush_of_buffered_writes_reaches_the_reader
    got = nil
    writer_error = nil
    farce do
      r, w = IO.pipe
      reader = Fiber.schedule { got = r.read }
      w.sync = false
      Fiber.schedule do
        w.write("head")
        w.print("tail")
        w.flush
      rescue StandardError => e
        writer_error = e
      ensure
        w.close
      end
      sleep 0.001 while reader.alive?
      r.close
    end
    assert_nil writer_error
    assert_equal "headtail", got
  end

  # Ruby 4.0 clears the scheduler of the forking thread in the child
  # (rb_thread_atfork); farce's own clean-up (lib/farce/fork.rb) finds
  # nothing left to do there. Older Rubies leave it to farce.
  def test_a_child_forked_in_a_fiber_starts_with_no_scheduler
    skip "no fork here" unless Process.respond_to?(:fork)

    out, status = ruby_subprocess(<<~RUBY)
      require "farce"
      $set_scheduler_calls = []
      Fiber.singleton_class.prepend(Module.new do
        def set_scheduler(s)
          $set_scheduler_calls << s
          super
        end
      end)
      Farce.run(backend: :#{backend}) do
        Fiber.schedule do
          r, w = IO.pipe
          $set_scheduler_calls.clear # Farce.run's own
          pid = fork do
            $stdout.puts "child scheduler=\#{Fiber.scheduler.inspect} cleared_by_farce=\#{!$set_scheduler_calls.empty?}"
            sleep 0.01            # plain blocking sleep
            w.write("from child")
            $stdout.flush
            exit!(0)
          end
          w.close
          $stdout.puts "parent read=\#{r.read}"
          Process.wait(pid)
          $stdout.puts "child status=\#{$?.exitstatus}"
        end
      end
    RUBY
    assert status.success?, out
    assert_includes out, "child scheduler=nil"
    assert_includes out, "parent read=from child"
    assert_includes out, "child status=0"
    # On 4.0 Ruby did it; before, farce's Process._fork hook did.
    assert_includes out, "cleared_by_farce=#{!RUBY40}"
  end
end
