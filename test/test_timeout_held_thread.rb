# frozen_string_literal: true

require_relative "test_helper"

# Timeout.timeout keeps its promise when the fiber it guards holds the
# thread in a wait that does not ask the scheduler (a blocking fiber's
# sleep, Ruby 3.4's Happy Eyeballs connect): farce raises the timeout into
# the held thread, as Timeout does without a scheduler (Farce::HeldAlarms).
# Before, the loop never came back to fire the alarm and the block ran to
# its end. Run on the backend the suite runs on (FARCE_BACKEND: every
# backend and the Ruby loop in `rake test`).
class TestTimeoutHeldThread < Minitest::Test
  # What the held thread would do if nothing interrupted it; long enough
  # that "it ended first" can never be mistaken for a timeout.
  HELD = 3

  # The raise into a held thread is on unless FARCE_HELD_TIMEOUTS=0 turned
  # it off for the run: these tests turn it on whatever the run's default
  def setup
    @held_was = Farce::HeldAlarms.enabled
    Farce::HeldAlarms.enabled = true
  end

  def teardown
    Farce::HeldAlarms.enabled = @held_was
  end

  def ruby_subprocess(code, **options)
    super(code, **options, env: { "FARCE_HELD_TIMEOUTS" => "1" }.merge(options.fetch(:env, {})))
  end

  # Holds the thread for `seconds` in a blocking fiber: its sleep waits in
  # the kernel without asking the scheduler.
  def hold(seconds)
    Fiber.new(blocking: true) { sleep seconds }.resume
  end

  # Farce.run on the suite's backend, with a guard that fails a hang: the
  # root fiber's Timeout is Ruby's own thread (no scheduler there yet).
  def guarded_farce(&block)
    Timeout.timeout(20) { farce(&block) }
  end

  def test_a_fiber_holding_the_thread_gets_its_timeout_there
    events = []
    error = nil
    guarded_farce do
      Timeout.timeout(0.2) do
        Fiber.new(blocking: true) do
          sleep HELD
          events << :held_call_returned
        ensure
          events << :inner_ensure
        end.resume
        events << :block_went_on
      ensure
        events << :block_ensure
      end
    rescue Timeout::Error => e
      error = e
    end
    assert_instance_of Timeout::Error, error
    assert_equal "execution expired", error.message
    assert_equal %i[inner_ensure block_ensure], events, "raised in the held sleep, every ensure clause ran"
  end

  # The same once the loop resumes the fiber (above, the Timeout is in the
  # fiber's first turn, which Fiber.schedule starts).
  def test_a_fiber_the_loop_resumed_is_raised_into_too
    guarded_farce do
      sleep 0.01
      assert_raises(Timeout::Error) { Timeout.timeout(0.1) { hold(HELD) } }
    end
  end

  # (Timeout 0.4.3 and later raise their own ExitException in the block and
  # a new Timeout::Error outside it, whose backtrace starts there: the
  # class the caller passes is raised as it is.)
  def test_the_class_and_message_the_caller_passed
    my_error = Class.new(StandardError)
    guarded_farce do
      error = assert_raises(my_error) { Timeout.timeout(0.1, my_error, "held too long") { hold(HELD) } }
      assert_equal "held too long", error.message
      assert error.backtrace.any? { |line| line.include?("sleep") }, "raised in the held sleep:\n#{error.backtrace.join("\n")}"
    end
  end

  # The same fiber holds the thread again right after, inside and after its
  # block, and parks inside it (the loop sees the alarm's timer then):
  # nothing more is raised (the alarm was raised once, then cancelled by
  # the block's end).
  def test_raised_once
    my_error = Class.new(StandardError)
    raised = 0
    guarded_farce do
      Timeout.timeout(0.1, my_error) do
        hold(HELD)
      rescue my_error
        raised += 1
        hold(0.3) # held again past the deadline, in the block, after the raise
        sleep 0.05
      end
      hold(0.3)
      sleep 0.05
    rescue my_error
      raised += 10
    end
    assert_equal 1, raised
  end

  # A block that ends in time is never raised into after it, even when the
  # fiber then holds the thread past the old deadline. (The block does not
  # wait: the thread keeps the GVL, so however late a loaded machine runs
  # it, the watcher cannot look before the block has ended.)
  def test_never_raised_after_the_block
    guarded_farce do
      assert_equal :done, Timeout.timeout(0.1) { :done }
      hold(0.4)
      sleep 0.05
    end
  end

  # Thread#raise calls the exception's #exception, Ruby code that may take
  # longer than Ruby's 100 ms time slice, and Ruby lets the loop's thread run
  # there before the exception is queued. Here the held call returns and the
  # block ends meanwhile: the timeout lands in the fiber it is for, at the
  # end of its block (as Timeout's own thread's raise may without a
  # scheduler), never in a later wait of that fiber or in the loop.
  def test_a_raise_slower_than_a_time_slice_lands_in_its_fiber
    slow_error = Class.new(StandardError) do
      def exception(*)
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < 0.3
        super
      end
    end
    outcome = nil
    guarded_farce do
      Timeout.timeout(0.05, slow_error) { hold(0.2) }
      outcome = :block_returned
    rescue slow_error
      outcome = :timed_out
    ensure
      sleep 0.5 # a raise landing late would land in this wait, or in the loop
    end
    assert_equal :timed_out, outcome
  end

  # The loop raises at the fiber's wait, as before, and only once: the
  # fiber then holds the thread in its rescue, inside the block.
  def test_a_parked_fiber_is_raised_into_by_the_loop_once
    my_error = Class.new(StandardError)
    guarded_farce do
      result = Timeout.timeout(0.05, my_error) do
        sleep HELD
      rescue my_error => e
        assert e.backtrace.any? { |line| line.include?("sleep") }
        hold(0.3)
        :rescued
      end
      assert_equal :rescued, result
    end
  end

  # Another fiber's Timeout is never raised into the fiber that holds the
  # thread: it waits for the loop, which raises it at that fiber's wait once
  # the holder is done. (The holder starts when the other fiber has set its
  # Timeout and parks; were it slow to start, the other fiber's Timeout
  # would only be raised before the hold: the holder is never raised into.)
  def test_an_alarm_of_a_parked_fiber_waits_for_the_loop
    events = []
    go = Thread::Queue.new
    guarded_farce do
      Fiber.schedule do
        go.pop
        hold(1) # past the other fiber's deadline and grace, without a Timeout of its own
        events << :holder_done
      end
      Fiber.schedule do
        Timeout.timeout(0.3) do
          go << true
          sleep HELD
        end
      rescue Timeout::Error
        events << :timed_out
      end
    end
    assert_equal %i[holder_done timed_out], events.sort
  end

  # The watcher looks again at an overdue alarm of a parked fiber only
  # while the loop runs: outside `run` nothing resumes the fiber before the
  # loop does (and raises it). A watcher that kept looking would keep Ruby
  # from seeing that the thread's own code is deadlocked.
  def test_ruby_still_sees_a_deadlock_outside_run
    out, = ruby_subprocess(<<~RUBY, timeout: 30)
      require "farce"
      require "timeout"
      $stdout.sync = true
      Fiber.set_scheduler(Farce::Scheduler.new(backend: #{backend.inspect}))
      Fiber.schedule { Timeout.timeout(0.05) { sleep 10 } rescue nil }
      begin
        Thread::Queue.new.pop # the thread's own fiber: no scheduler, and nobody to push
      rescue Exception => e
        puts "root: \#{e.class}: \#{e.message.lines.first}"
      end
      exit!(0)
    RUBY
    assert_match(/root: fatal: No live threads left. Deadlock/, out)
  end

  # Nested Timeouts: the inner one, due first, is raised; the outer one's
  # block then gets it as any exception.
  def test_nested_timeouts_raise_the_inner_one
    inner = Class.new(StandardError)
    outer = Class.new(StandardError)
    guarded_farce do
      error = assert_raises(inner) do
        Timeout.timeout(5, outer) { Timeout.timeout(0.1, inner) { hold(HELD) } }
      end
      assert_instance_of inner, error
    end
  end

  # The watcher thread is the parent's: a forked child starts its own.
  def test_a_child_forked_after_the_watcher_started
    skip "no fork here" unless Process.respond_to?(:fork)
    guarded_farce { Timeout.timeout(0.01) { hold(0.1) } rescue nil } # the parent's watcher runs now
    pid = fork do
      timed_out = begin
        Timeout.timeout(20) { Farce.run(backend: backend) { Timeout.timeout(0.1) { hold(HELD) } } }
        false
      rescue Timeout::Error
        true
      end
      exit!(timed_out ? 0 : 1)
    end
    Process.wait(pid)
    assert_predicate $?, :success?, "the child's held fiber got no Timeout::Error"
  end

  # The watcher holds its schedulers weakly, and a look must never reach one
  # the GC collected. On Ruby 3.1 a WeakMap checks only an entry's value for
  # liveness: with the scheduler as a key and `true` as its value, #keys
  # handed the look collected schedulers, and the call into one crashed the
  # process (the spec suite's spy_on gives schedulers singleton classes,
  # which is what these stand-ins have). Crashed in 3 runs of 3 on Ruby
  # 3.1.2 before; a stand-in answers as a scheduler with no alarms left.
  def test_a_look_after_its_schedulers_were_collected
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      stand_in = Class.new { private def __raise_held_alarms(_grace) = nil }
      watcher = Farce::HeldAlarms::Watcher.new
      30.times do |round|
        kept = []
        5000.times do |i|
          scheduler = stand_in.new
          scheduler.singleton_class if i.odd?
          watcher.watch(scheduler, 3600)
          kept << scheduler if (i % 500).zero?
        end
        Array.new(20_000) { Object.new }
        GC.start(full_mark: round.even?, immediate_sweep: (round % 3).zero?)
        Array.new(2000) { +"x" * 30 }
        watcher.send(:look)
      end
      puts "looked"
    RUBY
    assert status.success?, "the looks crashed the process:\n#{out.lines.first(5).join}"
    assert_equal "looked\n", out
  end

  # Ruby 3.4's TCPSocket.new waits for its connections in
  # rb_thread_fd_select (Happy Eyeballs), holding the thread: against a
  # listener whose accept queue is full, its Timeout never fired.
  def test_tcp_socket_new_to_a_full_accept_queue
    unless Socket.respond_to?(:tcp_fast_fallback)
      skip "Ruby #{RUBY_VERSION} has no Happy Eyeballs in TCPSocket.new (3.4+): its connect asks the scheduler"
    end
    server = Socket.new(:INET, :STREAM)
    server.bind(Addrinfo.tcp("127.0.0.1", 0))
    server.listen(1)
    port = server.local_address.ip_port
    queued = fill_accept_queue(port)
    error = nil
    connected = false
    guarded_farce do
      Timeout.timeout(0.3) do
        TCPSocket.new("localhost", port)
        connected = true
      end
    rescue Timeout::Error => e
      error = e
    end
    refute connected
    assert_instance_of Timeout::Error, error
    assert_equal "execution expired", error.message
  ensure
    queued&.each(&:close)
    server&.close
  end

  # Connects until one connection no longer completes: the accept queue of
  # a listener with backlog 1 is full then (the kernel drops the SYNs).
  def fill_accept_queue(port)
    queued = []
    16.times do
      queued << Socket.tcp("127.0.0.1", port, connect_timeout: 0.2)
    rescue Errno::ETIMEDOUT
      return queued
    end
    flunk "the accept queue never filled (#{queued.size} connections completed)"
  end

  # A negative, NaN or enormous duration gets what the same Timeout gives
  # without a scheduler, measured in the same child process (Ruby's own
  # Timeout thread reports its death on stderr for some): an error, a
  # timeout at once, or the block's value; never a hang.
  DURATIONS = ["-1", "Rational(-1, 2)", "Float::NAN", "Float::INFINITY", "1e300", "2**70", "9.5e9"].freeze

  def test_durations_timeout_cannot_wait_for
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      require "timeout"
      outcome = lambda do |duration|
        Timeout.timeout(duration) { sleep 0.5; :done }.inspect # time for Ruby's Timeout thread to raise at once
      rescue Exception => e
        e.class.name
      end
      Timeout.timeout(5) { :warm } # Ruby's Timeout thread is there before the durations need it
      #{DURATIONS.inspect}.each do |text|
        duration = eval(text)
        without = outcome.call(duration)
        sleep 0.05 # a late raise from Ruby's Timeout thread would land here, not in the next line
        with = Farce.run(backend: #{backend.inspect}) { outcome.call(duration) }
        puts [text, without, with].join("|")
      end
    RUBY
    assert status.success?, out
    rows = out.lines.map { |line| line.chomp.split("|") }.select { |row| row.size == 3 && DURATIONS.include?(row[0]) }
    assert_equal DURATIONS, rows.map(&:first), out
    rows.each do |text, without, with|
      assert_equal without, with, "Timeout.timeout(#{text}): without a scheduler #{without}, under farce #{with}"
    end
  end
end
