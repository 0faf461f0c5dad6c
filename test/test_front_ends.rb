# frozen_string_literal: true

require_relative "test_helper"

# One table of read/write/wait cases, run through both Ruby front ends of
# the loop, Farce::Scheduler (fibers resumed by `run`) and
# Farce::IOEventSelector (fibers transferred to by `select`, used here
# directly, without Async), expecting the same outcome from each. On
# io_uring, reads that must wait go through completion operations in both,
# which the stats show.
class TestFrontEnds < Minitest::Test
  EXTRA = RUBY_VERSION >= "3.2" ? [0] : [] # io_read's offset argument (3.2+)

  # Runs block(front) in a fiber of a Farce::Scheduler.
  class SchedulerFront
    attr_reader :stats

    def initialize(backend) = @backend = backend

    def run(&block)
      outcome = nil
      Thread.new do
        scheduler = Farce::Scheduler.new(backend: @backend)
        Fiber.set_scheduler(scheduler)
        Fiber.schedule do
          outcome = TestFrontEnds.capture { block.call(self) }
          @stats = scheduler.stats
        end
      end.join(30) or raise "scheduler run hung"
      outcome
    end

    def read(io, buffer, length) = Fiber.scheduler.io_read(io, buffer, length, *EXTRA)
    def write(io, buffer, length) = Fiber.scheduler.io_write(io, buffer, length, *EXTRA)
    def wait(io, timeout) = Fiber.scheduler.io_wait(io, IO::READABLE, timeout)
    def spawn(&block) = Fiber.schedule(&block)
    def pass = Fiber.scheduler.yield

    # Raises exception in the current fiber after seconds, from another fiber.
    def interrupt_after(seconds, exception)
      target = Fiber.current
      Fiber.schedule do
        sleep seconds
        target.raise(exception)
      end
    end
  end

  # Runs block(front) in a fiber of a Farce::IOEventSelector, calling
  # select until it finishes.
  class SelectorFront
    attr_reader :stats

    def initialize(backend) = @backend = backend

    def run(&block)
      saved = ENV["FARCE_BACKEND"]
      ENV["FARCE_BACKEND"] = @backend.to_s
      @loop = Fiber.current
      @selector = Farce::IOEventSelector.new(@loop)
      @interrupts = []
      outcome = nil
      done = false
      @fiber = Fiber.new do
        outcome = TestFrontEnds.capture { block.call(self) }
        done = true
        @loop.transfer
      end
      @fiber.transfer
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
      until done
        raise "selector run hung" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        @selector.select(0.01)
        due, @interrupts = @interrupts.partition { |at, _| Process.clock_gettime(Process::CLOCK_MONOTONIC) >= at }
        due.each { |_, exception| @selector.raise(@fiber, exception) }
      end
      @stats = @selector.stats
      outcome
    ensure
      @selector&.close
      ENV["FARCE_BACKEND"] = saved
    end

    def read(io, buffer, length) = @selector.io_read(Fiber.current, io, buffer, length, 0)
    def write(io, buffer, length) = @selector.io_write(Fiber.current, io, buffer, length, 0)

    # Another fiber of the selector, run at its next select.
    def spawn(&block)
      @selector.push(Fiber.new do
        block.call
        @loop.transfer
      end)
    end

    def pass = @selector.yield

    # io-event's io_wait has no timeout: a timeout is select's duration.
    def wait(io, timeout)
      Float(timeout).negative? || Float(timeout).nan? ? @selector.select(timeout) : @selector.io_wait(@fiber, io, IO::READABLE)
    end

    def interrupt_after(seconds, exception)
      @interrupts << [Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds, exception]
    end
  end

  def self.capture
    [:returned, yield]
  rescue StandardError => e
    [:raised, e.class]
  end

  class Interrupted < StandardError; end

  # name => [setup, expected outcome]; setup gets (front, reader, writer)
  # and returns what the fiber's block returns.
  CASES = {
    "bad length" => [->(front, r, _w) { front.read(r, IO::Buffer.new(4), 5) }, [:returned, -Errno::EINVAL::Errno]],
    "closed IO" => [->(front, r, _w) { r.close; front.read(r, IO::Buffer.new(4), 1) }, [:raised, IOError]],
    "end of file" => [->(front, r, w) { w.close; front.read(r, IO::Buffer.new(4), 1) }, [:returned, 0]],
    "EAGAIN, then data" => [
      lambda do |front, r, w|
        Thread.new { sleep 0.05; w.write("ab") }
        buffer = IO::Buffer.new(4)
        [front.read(r, buffer, 2), buffer.get_string(0, 2)]
      end,
      [:returned, [2, "ab"]]
    ],
    "interrupted read, then a read that works" => [
      lambda do |front, r, w|
        front.interrupt_after(0.05, Interrupted)
        first = begin
          front.read(r, IO::Buffer.new(4), 1)
        rescue Interrupted
          :interrupted
        end
        w.write("z")
        buffer = IO::Buffer.new(4)
        [first, front.read(r, buffer, 1), buffer.get_string(0, 1)]
      end,
      [:returned, [:interrupted, 1, "z"]]
    ],
    # On Windows a pipe has no kernel wait: the wait polls it, and must not
    # answer before the bytes are there.
    "a wait that data from a thread ends" => [
      lambda do |front, r, w|
        Thread.new { sleep 0.05; w.write("c") }
        [front.wait(r, 10), r.read_nonblock(1, exception: false)]
      end,
      [:returned, [IO::READABLE, "c"]]
    ],
    # On Windows a pipe has no kernel wait either way: a write of more than
    # the pipe holds writes what fits and polls while it is full. Had it
    # held the thread, the ticker would stop and, the reader waiting for
    # its ticks, the write would never end.
    "a write of far more than the pipe holds, read by another fiber" => [
      lambda do |front, r, w|
        size = 1 << 20
        data = ("a".."z").to_a.join * ((size / 26) + 1)
        data = data[0, size]
        ticks = 0
        done = false
        front.spawn do
          until done
            ticks += 1
            front.pass
          end
        end
        got = +""
        front.spawn do
          while got.bytesize < size
            seen = ticks
            front.pass while ticks == seen
            buffer = IO::Buffer.new(65_536)
            n = front.read(r, buffer, 1)
            got << buffer.get_string(0, n)
          end
        end
        written = front.write(w, IO::Buffer.for(data), size)
        front.pass while got.bytesize < size
        done = true
        [written, got == data, ticks.positive?]
      end,
      [:returned, [1 << 20, true, true]]
    ],
    # A full pipe answers write_nonblock at once: on Windows it never waits
    # for room, on a worker or with the thread.
    "write_nonblock of a full pipe" => [
      lambda do |_front, _r, w|
        written = 0
        10_000.times do
          n = w.write_nonblock("x" * 4096, exception: false)
          break if n == :wait_writable

          written += n
        end
        [written.positive?, w.write_nonblock("x", exception: false)]
      end,
      [:returned, [true, :wait_writable]]
    ],
    "negative timeout" => [->(front, r, _w) { front.wait(r, -1) }, [:raised, ArgumentError]],
    "NaN timeout" => [->(front, r, _w) { front.wait(r, Float::NAN) }, [:raised, ArgumentError]]
  }.freeze

  include FarceTestHelper

  def io_uring_available?
    Farce::Scheduler.new(backend: :io_uring).close
    true
  rescue Farce::Error
    false
  end

  CASES.each do |name, (setup, expected)|
    define_method("test_#{name.gsub(/\W+/, '_')}") do
      [backend].each do |backend|
        [SchedulerFront, SelectorFront].each do |front_class|
          r, w = IO.pipe
          got = front_class.new(backend).run { |front| setup.call(front, r, w) }
          assert_equal expected, got, "#{name} through #{front_class.name.split('::').last} on #{backend}"
        ensure
          [r, w].each { |io| io.close unless io.closed? }
        end
      end
    end
  end

  # Big pipe writes, more at once than the scheduler has workers, where the
  # first ones' readers wait for the last write to end: on Windows a write
  # that held a worker until its reader made room would leave the last one
  # waiting for a worker, and nothing would end.
  def test_more_big_pipe_writes_than_workers_all_end
    workers = 2
    size = 256 * 1024
    data = (("a".."z").to_a.join * ((size / 26) + 1))[0, size]
    pipes = Array.new(workers + 1) { IO.pipe }
    written = []
    got = Array.new(pipes.size) { +"" }
    Thread.new do
      Fiber.set_scheduler(Farce::Scheduler.new(backend: backend, worker_threads: workers))
      last_done = false
      pipes.each_with_index do |(r, w), i|
        last = i == pipes.size - 1
        Fiber.schedule do
          written[i] = Fiber.scheduler.io_write(w, IO::Buffer.for(data.dup), size, *EXTRA)
          last_done = true if last
        end
        Fiber.schedule do
          sleep 0.001 until last_done || last
          while got[i].bytesize < size
            buffer = IO::Buffer.new(65_536)
            n = Fiber.scheduler.io_read(r, buffer, 1, *EXTRA)
            break if n <= 0

            got[i] << buffer.get_string(0, n)
          end
        end
      end
    end.join(60) or flunk "the pipe writes did not all end"
    assert_equal [size] * pipes.size, written
    assert(got.all? { |g| g == data }, "every reader got all the bytes")
  ensure
    pipes&.flatten&.each { |io| io.close unless io.closed? }
  end

  def test_reads_that_must_wait_use_completion_operations_on_io_uring
    skip "io_uring unavailable here" unless io_uring_available?
    [SchedulerFront, SelectorFront].each do |front_class|
      r, w = IO.pipe
      front = front_class.new(:io_uring)
      got = front.run do |f|
        Thread.new { sleep 0.05; w.write("abc") }
        f.read(r, IO::Buffer.new(8), 3)
      end
      assert_equal [:returned, 3], got
      assert front.stats[:completion_ops], "#{front_class}: the io_uring core performs completion ops"
      assert_operator front.stats[:completion_ops_submitted], :>=, 1,
                      "#{front_class}: a read that had to wait went through a completion op"
    ensure
      [r, w].each { |io| io.close unless io.closed? }
    end
  end
end
