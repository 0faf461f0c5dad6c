# frozen_string_literal: true

require_relative "test_helper"

# A scheduler (or selector) belongs to the thread that runs it: hooks
# called from another thread raise Farce::Error, except those meant for
# other threads (unblock, fiber_interrupt, stats; the selector's wakeup and
# close), whose effect is handed to the loop. Nothing may hang: anything
# that could runs in a child process killed after a hard deadline
# (ruby_subprocess), so a regression fails instead of stopping the suite.
class TestCrossThreadUse < Minitest::Test
  # Abandon (or close) from another thread while the loop is blocked
  # must be handed to the loop or raise Farce::Error; it must never leave the
  # scheduler's thread blocked forever.
  def test_abandon_from_another_thread_does_not_hang_the_loop
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        $stdout.sync = true
        s = nil
        t = Thread.new do
          s = Farce::Scheduler.new(backend: :#{b})
          Fiber.set_scheduler(s)
          q = Queue.new
          Fiber.schedule { q.pop rescue nil }
        end
        # the loop blocked in its wait (the first scheduler starts Go: under
        # qemu-user emulation that alone can take longer than 0.3 s)
        500.times { break if s; sleep 0.01 }
        sleep 0.3
        begin
          s.abandon
          puts "abandon returned"
        rescue Farce::Error => e
          puts "abandon raised: \#{e.message}"
        end
        puts t.join(5) ? "thread ended" : "thread still running"
        exit!(0)
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/abandon (returned|raised)/, out, b)
      # handed over: the thread ends; raised: the loop keeps running (the fiber
      # still waits), which is fine as long as nothing hung.
      assert_match(/thread ended|abandon raised/, out, b)
    end
  end

  # Hooks called off the thread that owns the scheduler raise
  # Farce::Error (except unblock, fiber_interrupt and stats).
  def test_scheduler_hooks_off_the_owner_thread_raise
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        $stdout.sync = true
        #{OFFSET_DEFINITION}
        s = nil
        ready = Queue.new
        t = Thread.new do
          s = Farce::Scheduler.new(backend: :#{b})
          Fiber.set_scheduler(s)
          r, w = IO.pipe
          Fiber.schedule { ready << [r, w]; r.read(1) }
        end
        r, w = ready.pop
        sleep 0.2
        results = {}
        { io_wait: -> { s.io_wait(r, IO::READABLE, 0.01) },
          kernel_sleep: -> { s.kernel_sleep(0.01) },
          block: -> { s.block(Object.new, 0.01) },
          io_read: -> { s.io_read(r, IO::Buffer.new(4), 1, *OFFSET) } }.each do |name, call|
          call.call
          results[name] = "returned"
        rescue Farce::Error
          results[name] = "Farce::Error"
        rescue StandardError => e
          results[name] = e.class.name
        end
        s.stats # allowed from any thread
        w.write("x")
        t.join(5)
        puts results.map { |k, v| "\#{k}=\#{v}" }.join(" ")
        exit!(0)
      RUBY
      assert status.success?, "#{b}: #{out}"
      %w[io_wait kernel_sleep block io_read].each do |hook|
        assert_match(/#{hook}=Farce::Error/, out, "#{b}: #{hook}")
      end
    end
  end

  # The selector: io_wait and io_read from a thread other than the
  # selector's raise Farce::Error (io-event allows only push and wakeup from
  # anywhere, test_selector_cross_thread.rb; stats is read-only); close from another thread is handed to
  # the loop, which releases the core at its next select.
  def test_selector_hooks_off_the_owner_thread_raise
    each_backend do |b|
      out, status = ruby_subprocess(child_script("selector_hooks_off_the_owner_thread"),
                                    timeout: 20, env: { "FARCE_BACKEND" => b.to_s })
      assert status.success?, "#{b}: #{out}"
      assert_match(/io_wait=Farce::Error io_read=Farce::Error loop=loop_ended closed=true/, out, b)
    end
  end

  # Queue and Mutex list a fiber as waiting
  # before they call the scheduler's `block`; a Ruby frame in between (a
  # subclass calling super, or the Ruby loop's hooks once installed) lets
  # another thread run there and `unblock` the fiber before the core knows
  # it blocked. That wakeup must not be lost (the fiber would wait forever).
  def test_unblock_from_another_thread_before_block_is_not_lost
    (backends_under_test(NATIVE_BACKENDS) + [:ruby]).each do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        $blocking = $pushed = false
        class SlowBlock < Farce::Scheduler
          def block(blocker, timeout = nil)
            $blocking = true
            Thread.pass until $pushed # the pusher unblocks us here, before super registers the wait
            super
          end
        end
        got = nil
        s = SlowBlock.new(backend: :#{b})
        Fiber.set_scheduler(s)
        q = Queue.new
        Thread.new { Thread.pass until $blocking; q << :item; $pushed = true }
        Fiber.schedule { got = q.pop }
        s.run
        puts "got=\#{got.inspect}"
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/got=:item/, out, b)
    end
  end
end
