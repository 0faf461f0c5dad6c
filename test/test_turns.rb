# frozen_string_literal: true

require_relative "test_helper"

# Turns: a fiber that never blocks (a spawner, a reader whose
# socket always has data) must not hold the loop: past the turn budget its
# next hook that would not block gives the loop a turn. No timing is
# asserted: only that a ticker got a turn before the busy fiber was done,
# which without turns it never can.
class TestTurns < Minitest::Test
  def with_scheduler(**options)
    scheduler = Farce::Scheduler.new(backend: backend, **options)
    Fiber.set_scheduler(scheduler)
    yield scheduler
  ensure
    Fiber.set_scheduler(nil)
  end

  # A fiber that sleeps 1 ms at a time until stop[0]; returns the tick count holder.
  def ticker(stop)
    ticks = [0]
    Fiber.schedule do
      until stop[0]
        sleep 0.001
        ticks[0] += 1
      end
    end
    ticks
  end

  # Spawns count fibers (that finish at once) from the current fiber without
  # blocking; returns the ticks the ticker had when the spawning ended.
  def spawn_burst(ticks, count)
    count.times { Fiber.schedule {} }
    ticks[0]
  end

  def test_ticker_gets_a_turn_while_a_fiber_spawns_10_000_fibers
    seen = nil
    stats = nil
    with_scheduler do |scheduler|
      stop = [false]
      ticks = ticker(stop)
      Fiber.schedule do
        seen = spawn_burst(ticks, 10_000)
        stop[0] = true
        stats = scheduler.stats
      end
    end
    assert_operator seen, :>=, 1, "the ticker never ran while the spawner ran"
    assert_operator stats[:turns_given], :>=, 1
  end

  # The thread's own fiber outside `run` gets no turn (it cannot park): the
  # loop runs once the thread reaches run (or close), as Ruby's reference
  # scheduler has it and its test/fiber relies on (test_spawn_order.rb).
  def test_the_threads_own_fiber_spawning_before_run_gets_no_turn
    seen = nil
    stats = nil
    with_scheduler do |scheduler|
      stop = [false]
      ticks = ticker(stop)
      seen = spawn_burst(ticks, 10_000)
      stop[0] = true
      stats = scheduler.stats
    end
    assert_equal 0, seen, "the ticker ran while the thread's own fiber spawned, before run"
    assert_equal 0, stats[:turns_given]
  end

  def test_without_a_budget_the_spawner_holds_the_loop
    seen = nil
    stats = nil
    with_scheduler(turn_budget: nil) do |scheduler|
      stop = [false]
      ticks = ticker(stop)
      Fiber.schedule do
        seen = spawn_burst(ticks, 10_000)
        stop[0] = true
        stats = scheduler.stats
      end
    end
    assert_equal 0, seen, "without a turn budget nothing else runs until the spawner blocks"
    assert_nil stats[:turn_budget]
    assert_equal 0, stats[:turns_given]
  end

  # A turn is one iteration of the loop *before* the busy fiber runs again:
  # timers that expired while it held the loop fire first (the native core
  # queues it behind the events of the turn's poll; the Ruby loop queued it
  # ahead of them and ran it again first, so every spawn-burst turn started
  # with another budget of spawning).
  def test_timers_that_expired_while_a_fiber_held_the_loop_run_before_it_resumes
    log = []
    with_scheduler(turn_budget: 0.0005) do
      5.times do |i|
        Fiber.schedule do
          sleep 0.001
          log << :"sleeper#{i}"
        end
      end
      Fiber.schedule do
        held_since = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - held_since < 0.005 # every sleep is due
        Fiber.schedule {} # past the budget: the loop's turn
        log << :busy_fiber
      end
    end
    assert_equal %i[sleeper0 sleeper1 sleeper2 sleeper3 sleeper4 busy_fiber], log
  end

  # A UNIX socket pair whose reader holds more bytes than the tests read,
  # one at a time: every read finds data, so the reader never blocks.
  # Returns [reader, writer, bytes to read].
  def always_readable
    reader, writer = UNIXSocket.pair
    buffered = 0
    chunk = "x" * 4096
    loop do
      n = writer.write_nonblock(chunk, exception: false)
      break if n == :wait_writable

      buffered += n
    end
    to_read = [buffered - 4096, 50_000].min
    assert_operator to_read, :>, 10_000, "the socket buffers too little for this test (#{buffered} bytes)"
    [reader, writer, to_read]
  end

  def test_ticker_gets_a_turn_while_a_fiber_reads_a_socket_that_always_has_data
    reader, writer, to_read = always_readable
    seen = nil
    with_scheduler do
      stop = [false]
      ticks = ticker(stop)
      Fiber.schedule do
        to_read.times { reader.sysread(1) }
        seen = ticks[0]
        stop[0] = true
      end
    end
    assert_operator seen, :>=, 1, "the ticker never ran while the reader read"
  ensure
    reader&.close
    writer&.close
  end

  # The io-event selector: a fiber whose reads always find data transfers
  # to the loop fiber now and then (the loop's select runs meanwhile).
  def test_selector_loop_runs_while_a_fiber_reads_a_socket_that_always_has_data
    reader, writer, to_read = always_readable
    loop_fiber = Fiber.current
    selector = Farce::IOEventSelector.new(loop_fiber)
    assert_equal Farce::Scheduler::DEFAULT_TURN_BUDGET, selector.turn_budget
    done = false
    short = nil
    fiber = nil
    fiber = Fiber.new do
      buffer = IO::Buffer.new(1)
      short = to_read.times.count { selector.io_read(fiber, reader, buffer, 1, 0) != 1 }
      done = true
      loop_fiber.transfer
    end
    fiber.transfer
    selects = 0
    until done
      selects += 1
      selector.select(0)
    end
    assert_equal 0, short, "reads that did not read one byte"
    assert_operator selects, :>=, 1, "the reader never let the loop run"
    assert_operator selector.stats[:turns_given], :>=, 1
  ensure
    selector&.close
    reader&.close
    writer&.close
  end

  OFFSET = RUBY_VERSION >= "3.2" ? [0] : [] # io_read's offset argument (3.2+)

  # A turn due in a fiber that cannot park (the thread's own fiber calling a
  # hook by hand, no scheduler set) must not yield (that raises: nothing would
  # resume it): no turn is given and the read goes on. (A read that finds the
  # budget spent owes the turn to the next hook, which would give it before
  # it moves a byte.)
  def test_a_turn_due_in_the_threads_own_fiber_does_not_park_it
    scheduler = Farce::Scheduler.new(backend: backend, turn_budget: 0.001)
    r, w = IO.pipe
    w.write("xy")
    sleep 0.01 # past the budget since the scheduler was made
    assert_equal 1, scheduler.io_read(r, IO::Buffer.new(1), 1, *OFFSET)
    assert_equal 1, scheduler.io_read(r, IO::Buffer.new(1), 1, *OFFSET)
    assert_equal 0, scheduler.stats[:turns_given]
  ensure
    scheduler&.close
    r&.close
    w&.close
  end

  # A blocking fiber inside the running loop cannot park either, and the
  # loop is already running: the hook goes on without a turn.
  def test_a_turn_due_in_a_blocking_fiber_inside_run_is_skipped
    result = nil
    with_scheduler(turn_budget: 0.001) do |scheduler|
      r, w = IO.pipe
      w.write("x")
      Fiber.schedule do
        result = Fiber.new(blocking: true) do
          t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 0.005
          scheduler.io_wait(r, IO::READABLE, nil)
        end.resume
      end
    end
    assert_equal IO::READABLE, result
  end

  def test_budget_is_in_stats_and_settable
    with_scheduler do |scheduler|
      assert_equal Farce::Scheduler::DEFAULT_TURN_BUDGET, scheduler.stats[:turn_budget]
      assert_equal 0, scheduler.stats[:turns_given]
    end
    with_scheduler(turn_budget: 0.01) { |scheduler| assert_in_delta 0.01, scheduler.stats[:turn_budget], 1e-9 }
    with_scheduler(turn_budget: 0) { |scheduler| assert_nil scheduler.stats[:turn_budget] }
  end

  def test_bad_budgets_raise
    [-1, Float::NAN, "1", :x].each do |bad|
      assert_raises(ArgumentError, bad.inspect) { Farce::Scheduler.new(backend: backend, turn_budget: bad) }
    end
  end
end
