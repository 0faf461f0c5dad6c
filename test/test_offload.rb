# frozen_string_literal: true

require_relative "test_helper"
require "tempfile"
require "zlib"

# Work that runs on farce's worker threads: io_pread/io_pwrite (Ruby 3.3+;
# on io_uring completion operations instead) and blocking_operation_wait
# (Ruby 3.4+). The hooks themselves are plain
# methods, so their contract is also tested by calling them directly.
class TestOffload < Minitest::Test
  def needs(version, what)
    skip "#{what} needs Ruby #{version}; this is #{RUBY_VERSION}" if RUBY_VERSION < version
  end

  # ---- io_pread / io_pwrite ------------------------------------------------

  # Where io_pread/io_pwrite ran: on io_uring a regular file's way
  # (docs/behaviour.md, "Regular files": completion operations, or at once
  # when the page cache holds the bytes), elsewhere on a worker thread.
  def off_the_loop?(scheduler)
    stats = scheduler.stats
    return scheduler.worker_pool.threads >= 1 unless stats[:completion_ops]

    (stats[:completion_ops_submitted] + stats[:file_transfers_cached]).positive?
  end

  def test_pread_and_pwrite_on_a_regular_file
    needs "3.3", "IO#pread/IO#pwrite through the scheduler (io_pread/io_pwrite)"
    Tempfile.create("farce") do |f|
      f.write("0123456789")
      f.flush
      farce do
        File.open(f.path, "r+") do |io|
          assert_equal "345", io.pread(3, 3)
          assert_equal "89", io.pread(10, 8)
          assert_equal 3, io.pwrite("abc", 1)
          assert_equal "0abc4", io.pread(5, 0)
          assert_raises(EOFError) { io.pread(1, 100) }
        end
        assert off_the_loop?(Fiber.scheduler), "pread/pwrite must run on a worker thread (io_uring: as completion operations)"
      end
    end
  end

  # IO::Buffer#pread reaches io_pread with the GVL held, so the read runs
  # on a worker thread. (Ruby 3.3 and 3.4 call it for IO#pread without the
  # GVL: then it cannot leave the thread, see ext/farce/hook_io/positional_io.c.)
  def test_buffer_pread_on_a_big_file_lets_other_fibers_run
    needs "3.3", "IO::Buffer#pread through the scheduler (io_pread)"
    chunk = 1 << 20
    Tempfile.create("farce") do |f|
      f.binmode # a Windows Ruby opens it in text mode: each "\n" written would become "\r\n"
      data = Random.new(3).bytes(chunk) * 16
      f.write(data)
      f.flush
      log = []
      farce do
        done = false
        Fiber.schedule { until done; log << :tick; sleep 0; end }
        File.open(f.path) do |io|
          buffer = IO::Buffer.new(chunk)
          32.times do |i|
            at = (i % 16) * chunk
            assert_equal chunk, buffer.pread(io, at, chunk)
            assert_equal data.byteslice(at, chunk), buffer.get_string(0, chunk)
            log << :pread
          end
          out = IO::Buffer.for("written")
          File.open(f.path, "r+") { |w| assert_equal 7, out.pwrite(w, 5, 7) }
        end
        done = true
        assert off_the_loop?(Fiber.scheduler), "the reads must run on a worker thread (io_uring: as completion operations)"
      end
      assert_equal "written", File.binread(f.path, 7, 5)
      between = log.each_cons(2).count { |a, b| a == :pread && b == :tick }
      assert_operator between, :>=, 16, "other fibers must run while preads are under way (log: #{log.first(40)})"
    end
  end

  def test_pread_on_a_pipe_raises_espipe
    needs "3.3", "IO#pread through the scheduler (io_pread)"
    farce do
      r, w = IO.pipe
      assert_raises(Errno::ESPIPE) { r.pread(1, 0) }
      assert_raises(Errno::ESPIPE) { w.pwrite("x", 0) }
    end
  end

  def test_io_pread_hook_directly_returns_count_or_negative_errno
    skip "IO::Buffer needs Ruby 3.1" unless defined?(IO::Buffer)
    Tempfile.create("farce") do |f|
      f.write("hello world")
      f.flush
      scheduler = Farce::Scheduler.new(backend: backend)
      File.open(f.path, "r+") do |io|
        buffer = IO::Buffer.new(16)
        assert_equal 5, scheduler.io_pread(io, buffer, 6, 5, 0)
        assert_equal "world", buffer.get_string(0, 5)
        assert_equal 11, scheduler.io_pread(io, buffer, 0, 0, 0) # length 0: read once, as much as fits
        assert_equal 0, scheduler.io_pread(io, buffer, 100, 1, 0) # end of file
        out = IO::Buffer.for("HELLO")
        assert_equal 5, scheduler.io_pwrite(io, out, 0, 5, 0)
        assert_equal 3, scheduler.io_pwrite(io, out, 20, 3, 2)
      end
      assert_equal "HELLO world", File.binread(f.path, 11)
      assert_equal "LLO", File.binread(f.path, 3, 20)
      r, w = IO.pipe
      assert_equal(-Errno::ESPIPE::Errno, scheduler.io_pread(r, IO::Buffer.new(4), 0, 1, 0))
      [r, w].each(&:close)
      scheduler.close
    end
  end

  # ---- blocking_operation_wait ---------------------------------------------

  class Tracing < Farce::Scheduler
    attr_reader :operations

    def blocking_operation_wait(work)
      @operations = (@operations || 0) + 1
      super
    end
  end

  def test_zlib_does_not_stall_a_ping_pong
    needs "3.4", "blocking_operation_wait (Ruby routes zlib and other GVL-releasing C calls through it)"
    data = Random.new(5).bytes(1 << 20) * 24 # incompressible: deflate takes a while
    scheduler = Tracing.new(backend: backend)
    Fiber.set_scheduler(scheduler)
    rounds = 0
    during = nil
    compressed = nil
    Fiber.schedule do
      r1, w1 = IO.pipe
      r2, w2 = IO.pipe
      done = false
      Fiber.schedule { while (b = r1.read(1)); w2.write(b); end; w2.close }
      Fiber.schedule do
        until done
          w1.write("x")
          r2.read(1)
          rounds += 1
        end
        w1.close
      end
      before = rounds
      compressed = Zlib.deflate(data)
      during = rounds - before
      done = true
    end
    scheduler.run
    assert_operator scheduler.operations, :>=, 1, "Zlib.deflate must go through blocking_operation_wait"
    assert_equal data.bytesize, Zlib.inflate(compressed).bytesize
    assert_operator during, :>=, 20, "the ping-pong must keep going while zlib runs"
  ensure
    Fiber.set_scheduler(nil)
  end

  # Ruby 3.4 sends the close(2) of every writable IO through
  # blocking_operation_wait; a socket's close does not wait, and a worker's
  # round trip per close made a burst of hang-ups stall every connection
  # (bench/README.md, HTTP at 1,000 connections). It runs on the loop's
  # thread, also when a subclass wraps the hook, and IO works after it.
  def test_close_runs_on_the_loops_thread_not_on_a_worker
    needs "3.4", "blocking_operation_wait (Ruby 3.4 routes IO#close through it)"
    scheduler = Tracing.new(backend: backend)
    Fiber.set_scheduler(scheduler)
    pairs = Array.new(50) { UNIXSocket.pair }
    read_back = []
    pairs.each do |a, b|
      Fiber.schedule do
        a.write("x")
        a.close
        read_back << b.read # EOF after the byte: the close really happened
        b.close
      end
    end
    scheduler.run
    assert_operator scheduler.operations, :>=, 100, "each close must still reach blocking_operation_wait"
    assert_equal 0, scheduler.worker_pool.threads, "no close may go to a worker thread"
    assert_equal ["x"] * 50, read_back
    assert pairs.flatten.all?(&:closed?)
  ensure
    Fiber.set_scheduler(nil)
  end

  def test_blocking_operation_wait_returns_the_value_and_raises_the_exception
    value = error = nil
    farce do
      value = Fiber.scheduler.blocking_operation_wait(-> { Thread.current })
      error = assert_raises(ZeroDivisionError) { Fiber.scheduler.blocking_operation_wait(-> { 1 / 0 }) }
    end
    refute_equal Thread.current, value, "the operation must run on a worker thread"
    assert_kind_of ZeroDivisionError, error
  end

  def test_the_pool_is_bounded_and_operations_overlap_up_to_its_size
    ran = 0
    running = 0
    peak = 0
    lock = Mutex.new
    # how many run at once, counted by the operations themselves (a wall-clock
    # bound failed under qemu-user emulation, where everything is slower)
    operation = lambda do
      lock.synchronize { running += 1; peak = [peak, running].max }
      sleep 0.1
      lock.synchronize { running -= 1; ran += 1 }
    end
    t = monotonic
    threads = nil
    Farce.run(backend: backend, worker_threads: 2, worker_queue: 1) do
      pool = Fiber.scheduler.worker_pool
      6.times { Fiber.schedule { Fiber.scheduler.blocking_operation_wait(operation) } }
      threads = pool.threads
    end
    elapsed = monotonic - t
    assert_equal 6, ran
    assert_operator threads, :<=, 2
    assert_equal 2, peak, "they must run 2 at a time: the pool's size, never more"
    assert_operator elapsed, :>=, 0.29, "6 operations of 0.1 s on 2 threads take at least 0.3 s"
  end

  def test_an_operation_always_runs_to_its_end_before_an_interrupt_is_raised
    finished = false
    error = nil
    elapsed = nil
    farce do
      t = monotonic
      begin
        Timeout.timeout(0.01) { Fiber.scheduler.blocking_operation_wait(-> { sleep 0.08; finished = true }) }
      rescue Timeout::Error => e
        error = e
      end
      elapsed = monotonic - t
    end
    assert finished, "the operation must not be abandoned"
    assert_kind_of Timeout::Error, error
    assert_operator elapsed, :>=, 0.075
  end

  # A worker woken for a job is still counted as waiting until it runs: a
  # second job submitted before then must get a thread of its own, or it
  # queues behind the first. Here the first waits for the second (as a
  # pipe's write on a worker waits for its read on another, on Windows),
  # so the second would never run.
  def test_a_job_submitted_before_the_woken_worker_ran_gets_a_thread_of_its_own
    second_ran = false
    first_saw_it = nil
    Farce.run(backend: backend, worker_threads: 2) do
      pool = Fiber.scheduler.worker_pool
      pool.run(-> {}) # one worker thread, idle from now on
      deadline = monotonic + 10
      sleep 0.001 until pool.instance_variable_get(:@jobs).num_waiting == 1 || monotonic > deadline
      # both submitted in one go: nothing here lets the woken worker run
      Fiber.schedule do
        first_saw_it = pool.run(lambda do
          limit = monotonic + 5 # generous: without a second thread it never comes
          sleep 0.001 until second_ran || monotonic > limit
          second_ran
        end)
      end
      Fiber.schedule { pool.run(-> { second_ran = true }) }
    end
    assert first_saw_it, "the second job waited behind the first: no thread was started for it"
  end

  def test_workers_end_when_the_scheduler_closes
    workers = -> { Thread.list.count { |t| t.name == "farce-worker" && t.alive? } }
    peak = 0
    farce do
      4.times { Fiber.schedule { Fiber.scheduler.blocking_operation_wait(-> { sleep 0.01 }) } }
      peak = workers.call
    end
    assert_operator peak, :>=, 1
    deadline = monotonic + 2
    sleep 0.01 while workers.call.positive? && monotonic < deadline
    assert_equal 0, workers.call
  end

  def test_worker_pool_options_are_validated
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: backend, worker_threads: 0) }
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: backend, worker_queue: -1) }
  end
end
