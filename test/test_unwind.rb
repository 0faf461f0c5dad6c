# frozen_string_literal: true

require_relative "test_helper"

# When a scheduler's run ends abnormally (Farce.run's block raised, the
# thread was killed) with fibers still parked, the fibers are unwound before
# the loop is released (lib/farce/unwind.rb): their ensure clauses run, and
# Ruby takes them out of the Mutex, Queue or ConditionVariable they wait in.
# Left there, the next unlock or push wakes a fiber of a dead thread and
# Ruby aborts ("[BUG] unexpected THREAD_KILLED"), so every case runs in a
# child process with a hard timeout, on every backend this system has.
class TestUnwind < Minitest::Test
  ALL_BACKENDS = %i[epoll io_uring poll ruby].freeze
  BUG = /\[BUG\]|unexpected THREAD_KILLED|Aborted|core dumped/

  def backends
    backends_under_test(ALL_BACKENDS)
  end

  # Runs code (with BACKEND set) in a child per backend; yields its output
  # and status.
  def each_backend_run(code, timeout: 30)
    list = backends
    skip "no backend selected is available" if list.empty?
    list.each do |b|
      out, status = ruby_subprocess("$stdout.sync = true\nThread.report_on_exception = false\n" \
                                    "BACKEND = :#{b}\nrequire 'farce'\n#{code}", timeout: timeout)
      refute_match BUG, out, "#{b}: Ruby aborted"
      yield b, out, status
    end
  end

  # The issue's snippet: a thread's Farce.run raises with a fiber parked in
  # Mutex#lock; the main thread unlocks the Mutex after that thread died.
  def test_fiber_parked_in_mutex_lock_of_a_dead_thread
    each_backend_run(<<~RUBY) do |b, out, status|
      m = Mutex.new
      m.lock
      ran = []
      t = Thread.new do
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            m.lock
            ran << :locked
          ensure
            ran << :ensure
          end
          raise IOError, "boom"
        end
      end
      begin
        t.join
      rescue IOError => e
        puts "raised \#{e.class}: \#{e.message}"
      end
      m.unlock
      puts "unlocked ran=\#{ran.inspect} locked_after=\#{m.locked?}"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/raised IOError: boom/, out, b)
      assert_match(/unlocked ran=\[:ensure\] locked_after=false/, out, b)
    end
  end

  # The same at process exit: the main thread's Farce.run raises while
  # another thread holds the Mutex the fiber waits for; Ruby kills that
  # thread at exit and its unlock finds the waiter.
  def test_main_thread_run_raises_while_another_thread_holds_the_mutex
    each_backend_run(<<~RUBY) do |b, out, status|
      m = Mutex.new
      holder = Thread.new { m.synchronize { sleep } }
      Thread.pass until m.locked? && holder.status == "sleep"
      Farce.run(backend: BACKEND) do
        Fiber.schedule do
          m.lock
        ensure
          puts "fiber ensure ran"
        end
        raise IOError, "boom at exit"
      end
    RUBY
      refute status.success?, "#{b}: the uncaught IOError must fail the process: #{out}"
      assert_equal 1, status.exitstatus, "#{b}: #{out}"
      assert_match(/fiber ensure ran/, out, b)
      assert_match(/boom at exit \(IOError\)/, out, b)
    end
  end

  # Fibers parked in each kind of wait: Queue#pop, ConditionVariable#wait,
  # sleep, a descriptor wait (a read of an empty pipe), Mutex#lock. Every
  # ensure runs; the queue and the mutex work afterwards from another
  # thread; the exception is the block's, even when an ensure raises.
  def test_every_kind_of_wait_is_unwound_and_the_block_exception_wins
    each_backend_run(child_script("unwind_every_kind_of_wait")) do |b, out, status|
      assert status.success?, "#{b}: #{out}"
      assert_match(/raised IOError: the block's/, out, b)
      assert_match(/ensures: \[:cv, :mutex, :queue, :read, :sleep\]/, out, b)
      assert_match(/queue size 1, mutex locked false, pipe x/, out, b)
    end
  end

  # The loop still works for what the ensure clauses do: a fiber's ensure
  # writes to a pipe another fiber waits on, and that fiber's ensure reads
  # what it can.
  def test_ensure_clauses_can_use_the_loop
    each_backend_run(<<~RUBY) do |b, out, status|
      r, w = IO.pipe
      q = Queue.new
      begin
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            q.pop
          ensure
            w.write("bye")
            sleep 0 # a wait of the loop's own, inside the ensure
            puts "ensure wrote"
          end
          raise IOError, "boom"
        end
      rescue IOError => e
        puts "raised \#{e.message}"
      end
      puts "pipe holds \#{r.read_nonblock(10)}"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/ensure wrote/, out, b)
      assert_match(/raised boom/, out, b)
      assert_match(/pipe holds bye/, out, b)
    end
  end

  # An ensure clause that needs the loop several times over (each `sleep 0`
  # is one of its iterations) finishes in the round that unwound it: the
  # unwinding runs the loop for as long as that resumes fibers. One
  # iteration per round let the next round raise into the second wait.
  def test_an_ensure_that_waits_several_times_finishes
    each_backend_run(<<~RUBY) do |b, out, status|
      q = Queue.new
      steps = []
      begin
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            q.pop
          ensure
            4.times { |i| sleep 0; steps << i }
          end
          raise IOError, "boom"
        end
      rescue IOError => e
        puts "raised \#{e.message} steps=\#{steps.inspect}"
      end
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_equal "raised boom steps=[0, 1, 2, 3]", out.chomp, b
    end
  end

  # The same with a turn budget so small that every hook which would go on
  # without blocking (the ensure's write, each write of its puts) is past
  # it: the interleaving a loaded machine made at random (the fiber
  # preempted for longer than the default 0.5 ms between being unwound and
  # its write), made every time. A turn given there parked the fiber once
  # more than the round's one iteration of the loop allowed for, and the
  # next round raised into its `sleep 0` (the Ruby loop lost the whole
  # line) or into the puts between its text and its newline (the native
  # loop lost the newline; Ruby 3.1's puts waits for writability, which
  # did the same on the Ruby loop without any budget).
  def test_turns_given_inside_an_ensure_do_not_cut_it_short
    each_backend_run(<<~RUBY) do |b, out, status|
      r, w = IO.pipe
      q = Queue.new
      begin
        Farce.run(backend: BACKEND, turn_budget: 1e-9) do
          Fiber.schedule do
            q.pop
          ensure
            w.write("bye")
            sleep 0
            puts "ensure wrote"
            w.write(" again")
            puts "ensure ended"
          end
          raise IOError, "boom"
        end
      rescue IOError => e
        puts "raised \#{e.message}"
      end
      puts "pipe holds \#{r.read_nonblock(20)}"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_equal ["ensure wrote", "ensure ended", "raised boom", "pipe holds bye again"], out.lines(chomp: true), b
    end
  end

  # An ensure clause that never stops yielding is cut off: the unwinding's
  # iterations are bounded (Unwinding::UNWIND_TURNS per round).
  def test_an_ensure_that_yields_for_ever_does_not_hang
    each_backend_run(<<~RUBY, timeout: 30) do |b, out, status|
      q = Queue.new
      yields = 0
      begin
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            q.pop
          ensure
            loop do
              sleep 0
            rescue Farce::Unwind
              nil # rescued every time: only the rounds' end stops it (Fiber#kill on 3.3+)
            ensure
              yields += 1
            end
          end
          raise IOError, "boom"
        end
      rescue IOError => e
        puts "raised \#{e.message} yields=\#{yields}"
      end
    RUBY
      assert status.success?, "#{b}: #{out}"
      yields = out[/raised boom yields=(\d+)/, 1]
      assert yields, "#{b}: #{out}"
      bound = Farce::Unwinding::UNWIND_TURNS * Farce::Unwinding::UNWIND_ROUNDS
      assert_operator yields.to_i, :>, Farce::Unwinding::UNWIND_TURNS, "#{b}: more than one round's iterations ran"
      assert_operator yields.to_i, :<=, bound + Farce::Unwinding::UNWIND_ROUNDS, "#{b}: #{out}"
    end
  end

  # An ensure clause that parks for good (a long sleep, a read nobody
  # answers, a rescue that waits again) is unwound again; what still waits
  # after the last round is abandoned. Nothing hangs.
  def test_an_ensure_that_parks_again_does_not_hang
    each_backend_run(<<~RUBY, timeout: 30) do |b, out, status|
      q = Queue.new
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      begin
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            q.pop
          ensure
            begin
              sleep 60
            ensure
              puts "inner ensure ran"
            end
          end
          raise IOError, "boom"
        end
      rescue IOError => e
        puts "raised \#{e.message}"
      end
      puts "took \#{(Process.clock_gettime(Process::CLOCK_MONOTONIC) - started).round(1)}s"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/inner ensure ran/, out, b)
      assert_match(/raised boom/, out, b)
      took = out[/took ([\d.]+)s/, 1]
      assert took && took.to_f < 20, "#{b}: #{out}"
    end
  end

  # Thread#kill of a thread whose scheduler has a fiber parked in
  # Mutex#lock: Ruby 3.3+ closes the scheduler as the thread exits, which
  # abandons it (the thread is aborting), and the fiber is unwound too. Ruby
  # 3.1 does not close it (the scheduler stays set on the dead thread, and
  # the unlock reaches its `unblock`, which is harmless): nothing may abort.
  def test_thread_kill_unwinds_the_parked_fibers
    each_backend_run(<<~RUBY) do |b, out, status|
      closed = Queue.new
      Farce::Scheduler.prepend(Module.new { define_method(:close) { closed << true; super() } })
      m = Mutex.new
      m.lock
      ran = Queue.new
      t = Thread.new do
        Fiber.set_scheduler(Farce::Scheduler.new(backend: BACKEND))
        Fiber.schedule { begin; m.lock; ensure; ran << :ensure; end }
        sleep # the root fiber: Thread#kill ends it
      end
      Thread.pass until t.status == "sleep"
      sleep 0.1
      t.kill
      t.join
      m.unlock
      puts "closed=\#{!closed.empty?} ensure=\#{ran.empty? ? :none : ran.pop} locked=\#{m.locked?}"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/closed=true ensure=ensure locked=false/, out, b) if RUBY_VERSION >= "3.3"
      assert_match(/closed=(true ensure=ensure|false ensure=none) locked=false/, out, b)
    end
  end

  # io_uring: a fiber parked in a completion operation (an IO::Buffer read
  # of a pipe) leaves it only once the kernel let go of the buffer; it is
  # unwound (the operation cancelled, its completion reaped) and consumes no
  # byte that nobody would see.
  def test_a_fiber_in_a_completion_operation_is_unwound_without_consuming_input
    each_backend_run(<<~RUBY) do |b, out, status|
      Warning[:experimental] = false
      r, w = IO.pipe
      ran = []
      ops = nil
      begin
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            buffer = IO::Buffer.new(8)
            buffer.read(r, 1)
          ensure
            ran << :ensure
          end
          ops = Fiber.scheduler.stats[:completion_ops_submitted].to_i
          raise IOError, "boom"
        end
      rescue IOError => e
        puts "raised \#{e.message}"
      end
      w.write("ab")
      puts "ops=\#{ops} ran=\#{ran.inspect} left=\#{r.read_nonblock(5)}"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/raised boom/, out, b)
      assert_match(/ran=\[:ensure\] left=ab/, out, b)
      assert_match(/ops=[1-9]/, out, "#{b}: the read was a completion operation") if b == :io_uring
    end
  end

  # A fiber that rescues everything and waits again: Fiber#kill (Ruby 3.3+)
  # ends it in the last rounds, so it leaves the Mutex's queue too. (Before
  # 3.3 nothing can stop such a fiber: it is abandoned, still queued.)
  def test_a_fiber_that_rescues_everything_is_killed
    skip "needs Fiber#kill (Ruby 3.3+)" unless Fiber.method_defined?(:kill)
    each_backend_run(<<~RUBY) do |b, out, status|
      m = Mutex.new
      m.lock
      tries = 0
      t = Thread.new do
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            loop do
              tries += 1
              m.lock
            rescue Exception # rubocop:disable Lint/RescueException
              nil
            end
          end
          raise IOError, "boom"
        end
      end
      t.join rescue nil
      m.unlock
      puts "tries=\#{tries} locked=\#{m.locked?}"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/tries=3 locked=false/, out, b)
    end
  end

  # Farce::Unwind is not a StandardError: a
  # fiber's `rescue => e` does not stop the unwinding.
  def test_a_standard_rescue_does_not_stop_the_unwinding
    each_backend_run(<<~RUBY) do |b, out, status|
      m = Mutex.new
      m.lock
      rescued = []
      t = Thread.new do
        Farce.run(backend: BACKEND) do
          Fiber.schedule do
            m.lock
          rescue StandardError => e
            rescued << e
          end
          raise IOError, "boom"
        end
      end
      t.join rescue nil
      m.unlock
      puts "rescued=\#{rescued.size} unwind_is_standard=\#{Farce::Unwind < StandardError ? true : false}"
    RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/rescued=0 unwind_is_standard=false/, out, b)
    end
  end
end
