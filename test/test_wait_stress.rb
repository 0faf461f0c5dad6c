# frozen_string_literal: true

require_relative "test_helper"

# The loop's wait paths under many interleavings: test/support/wait_stress_workload.rb,
# a seeded random mix of descriptor waits, untimed and timed parks, wakes from
# the loop's thread and from others, and every way of leaving a wait early,
# runs in a child process with a hard deadline, on the backend FARCE_BACKEND
# names (rake test runs the suite once per backend). Then the bugs that
# workload found, each pinned by a test of its own.
class TestWaitStress < Minitest::Test
  WORKLOAD = File.expand_path("support/wait_stress_workload.rb", __dir__)

  # FARCE_STRESS_SEED=n replays one seed; FARCE_STRESS_SEEDS (default 1)
  # random seeds per run and FARCE_STRESS_SCENARIOS (default 1500) scale it
  # up for a soak; FARCE_STRESS_DEADLINE (seconds, default 60) is when a run
  # counts as hung.
  def test_random_waits_wakes_and_interruptions
    seeds = if ENV["FARCE_STRESS_SEED"]
              [Integer(ENV["FARCE_STRESS_SEED"])]
            else
              Array.new(Integer(ENV.fetch("FARCE_STRESS_SEEDS", "1"))) { Random.new_seed % (1 << 31) }
            end
    scenarios = Integer(ENV.fetch("FARCE_STRESS_SCENARIOS", "1500"))
    deadline = Integer(ENV.fetch("FARCE_STRESS_DEADLINE", "60"))
    failed = seeds.filter_map do |seed|
      out, status = run_workload(seed, scenarios, deadline)
      next if status.success? && out.match?(/^OK seed #{seed} /)

      "seed #{seed} on #{backend} (exit #{status.exitstatus.inspect}):\n#{out}\nreplay: FARCE_STRESS_SEED=#{seed} " \
        "FARCE_STRESS_SCENARIOS=#{scenarios} FARCE_BACKEND=#{backend} ruby -Ilib -Itest test/test_wait_stress.rb -n /random/"
    end
    assert_empty failed, "#{failed.size} of #{seeds.size} seeds failed:\n#{failed.join("\n")}"
  end

  # The workload in a child: its watchdog reports a hang after deadline
  # seconds (exit 3, with the scenarios still running), and the child is
  # killed if even that cannot run.
  def run_workload(seed, scenarios, deadline)
    out = +""
    env = { "FARCE_STRESS_DEADLINE" => deadline.to_s }
    IO.popen(env, [RbConfig.ruby, "-I", LIB, WORKLOAD, seed.to_s, scenarios.to_s, backend.to_s],
             err: %i[child out], pgroup: true) do |io|
      reader = Thread.new { out << io.read }
      unless reader.join(deadline + 30)
        Process.kill(:KILL, -io.pid)
        reader.join(5)
        flunk "seed #{seed}: the workload hung past its own watchdog; output so far:\n#{out}"
      end
    end
    [out, $?]
  end

  # read_nonblock and write_nonblock reach the io_read/io_write hooks with a
  # length of 0 (Ruby 3.1 to 3.4): they must answer -EAGAIN when nothing can
  # be done, not park the fiber until the descriptor is ready (forever, when
  # no data comes).
  def test_nonblocking_read_and_write_never_wait
    out, status = ruby_subprocess(<<~RUBY, timeout: 20) # a parked fiber: the child hangs
      require "farce"
      $stdout.sync = true
      Farce.run(backend: :#{backend}) do
        r, w = IO.pipe
        a, b = UNIXSocket.pair
        Fiber.schedule do
          w.write("abc")
          puts "pipe read: \#{r.read_nonblock(100, exception: false).inspect}"
          puts "pipe read empty: \#{r.read_nonblock(100, exception: false).inspect}"
          w.write_nonblock("x" * 65_536, exception: false) until w.write_nonblock("x", exception: false) == :wait_writable
          puts "pipe write full: \#{w.write_nonblock("y", exception: false).inspect}"
          puts "socket read empty: \#{a.read_nonblock(10, exception: false).inspect}"
          begin
            a.read_nonblock(10)
          rescue IO::WaitReadable
            puts "socket read raised WaitReadable"
          end
        end
      end
      puts "done"
      exit!(0)
    RUBY
    assert status.success?, out
    assert_includes out, 'pipe read: "abc"'
    assert_includes out, "pipe read empty: :wait_readable"
    assert_includes out, "pipe write full: :wait_writable"
    assert_includes out, "socket read empty: :wait_readable"
    assert_includes out, "socket read raised WaitReadable"
    assert_includes out, "done"
  end

  # Whether the caller is read_nonblock/write_nonblock is cached per frame
  # (io_transfer.c): answers must stay right when hundreds of other methods
  # read blocking in between (they push read_nonblock's entry out of the
  # cache) and after GC.compact (a cached frame must not move or be freed).
  def test_nonblocking_calls_never_wait_after_cache_churn_and_compaction
    out, status = ruby_subprocess(<<~RUBY, timeout: 30) # a parked fiber: the child hangs
      require "farce"
      $stdout.sync = true
      readers = Module.new
      # one instruction sequence each (define_method's would all share its block's)
      300.times { |i| readers.module_eval("def blocking_read_\#{i}(io) io.read(1) end") }
      reader = Object.new.extend(readers)
      answers = []
      read = 0
      Farce.run(backend: :#{backend}) do
        r, w = IO.pipe
        Fiber.schedule do
          3.times do |round|
            300.times do |i|
              Fiber.schedule do # parks: the pipe is empty
                reader.public_send(:"blocking_read_\#{i}", r)
                read += 1
              end
              w.write("x")
            end
            # until every reader has its byte, so that the pipe is empty:
            # a fixed sleep was too short where a parked reader learns of
            # its byte late (a Windows pipe is polled, in steps of up to 16 ms)
            sleep 0.001 until read == 300 * (round + 1)
            answers << r.read_nonblock(10, exception: false)
            GC.compact if GC.respond_to?(:compact) && round == 1
          end
          nil until w.write_nonblock("y" * 65_536, exception: false) == :wait_writable
          answers << w.write_nonblock("y", exception: false)
        end
      end
      puts "answers: \#{answers.grep(Symbol).inspect}"
      exit!(0)
    RUBY
    assert status.success?, out
    assert_includes out, "answers: [:wait_readable, :wait_readable, :wait_readable, :wait_writable]"
  end

  # io_wait gave the loop its turn after it read the IO's descriptor: a
  # fiber that ran in that turn closed the IO and a new pipe took the
  # number, and the wait was made on the new pipe (it answered "readable").
  def test_io_wait_after_its_turn_waits_on_the_io_not_on_its_old_number
    result = nil
    reused = nil
    Farce.run(backend: backend, turn_budget: 0.0005) do
      r1, w1 = IO.pipe
      fd = r1.fileno
      r2 = w2 = nil
      closer = Fiber.schedule do
        sleep 0 # ready: runs in the turn the waiter gives
        r1.close
        r2, w2 = IO.pipe
        reused = r2.fileno == fd
        w2.write("new") # the new pipe is readable
      end
      t = monotonic
      nil while monotonic - t < 0.003 # past the turn budget: the next hook gives a turn
      result = begin
        r1.wait_readable(0.5)
      rescue IOError => e
        e
      end
      # The write may find the budget spent too (a GC in the closer's turn
      # is enough) and give a turn before it writes: this fiber then comes
      # back first, and closing w2 under it raised IOError in the closer.
      t = monotonic
      sleep 0.001 while closer.alive? && monotonic - t < 2
      [w1, r2, w2].compact.each(&:close)
    end
    skip "the new pipe did not reuse the number" unless reused
    assert_kind_of IOError, result, "wait_readable on the closed IO answered #{result.inspect}"
  end

  # A waiter made ready, then its IO closed by a fiber the loop resumed
  # before it: the readiness was the descriptor's, the IO is gone.
  # Without a turn budget: on a loaded machine the writer's write could
  # outlast the default 0.5 ms and give a turn there, which puts the waiter
  # before it in the next iteration (it then got the IO, readable, and the
  # test took that for the bug).
  def test_io_wait_whose_io_was_closed_before_it_resumed_raises_ioerror
    result = nil
    farce(turn_budget: nil) do
      r, w = IO.pipe
      Fiber.schedule do
        result = r.wait_readable
      rescue IOError => e
        result = e
      end
      Fiber.schedule do
        w.write("a")
        sleep 0 # the poll finds r readable: both fibers ready, this one first
        r.close
      end
      sleep 0.05
      w.close
    end
    assert_kind_of IOError, result, "wait_readable on the IO closed meanwhile answered #{result.inspect}"
  end

  # Fiber#kill (Ruby 3.3+) unwinds a parked fiber past any rescue: the Ruby
  # core's park cancelled its wait only in a rescue, so the wait stayed
  # (parked_fibers 1) and the loop waited for it forever at the end.
  def test_fiber_kill_of_a_parked_fiber_cancels_its_wait
    skip "Fiber#kill is Ruby 3.3+" unless Fiber.method_defined?(:kill)
    out, status = ruby_subprocess(child_script("fiber_kill_cancels_parked_waits", BACKEND: backend), timeout: 30) # the loop hangs at the end
    assert status.success?, out
    %w[read write pop sleep timed_read].each { |kind| assert_includes out, "#{kind}: alive=false parked=0 pending=0" }
    assert_includes out, "done"
  end

  # A fiber whose wait was ready (here: sleep 0, resumed at the next
  # iteration; a turn given inside a hook is the same) and that an
  # exception or Fiber#kill finished before the loop came to it: its wait
  # counts neither as pending nor as ready. The Ruby loop counted its
  # queues, where the finished wait's entry stays until the loop passes it
  # (pending_waits -1, ready_waits 1: the kill test above, now and then).
  def test_a_ready_wait_finished_by_an_exception_or_kill_is_no_longer_counted
    endings = { raise: ->(f) { f.raise(RuntimeError, "ended") } }
    endings[:kill] = :kill.to_proc if Fiber.method_defined?(:kill)
    endings.each do |how, ending|
      counted = nil
      farce do
        target = Fiber.schedule do
          sleep 0
        rescue RuntimeError
          nil
        end
        ending.call(target)
        stats = Fiber.scheduler.stats
        counted = [target.alive?, stats[:parked_fibers], stats[:pending_waits], stats[:ready_waits]]
      end
      assert_equal [false, 0, 0, 0], counted, "#{how}: [alive, parked_fibers, pending_waits, ready_waits]"
    end
  end

  # A transfer that found the turn budget spent gave the loop its turn
  # after its bytes had moved: a Timeout that fired in that turn raised
  # into the fiber there, and the bytes the read had read were lost (20 of
  # 20 on the Go core before). The turn is owed to the next hook now.
  def test_timeout_in_the_turn_after_a_read_loses_no_data
    5.times do |i|
      got = rest = nil
      Farce.run(backend: backend, turn_budget: 0.0005) do
        r, w = IO.pipe
        w.write("data")
        begin
          Timeout.timeout(0.002) do
            t = monotonic
            nil while monotonic - t < 0.005 # past the budget and the deadline, without a hook
            got = r.readpartial(100)
          end
        rescue Timeout::Error
          nil
        end
        rest = r.read_nonblock(100, exception: false)
        r.close
        w.close
      end
      assert(got == "data" || rest == "data", "round #{i}: the read's bytes were lost (got #{got.inspect}, left #{rest.inspect})")
    end
  end
end

