# frozen_string_literal: true

# Stall detection and turns under Async on IO::Event::Selector::Farce,
# in a child process per case with IO_EVENT_SELECTOR=Farce.
# Needs Async (Debian sid's Ruby 3.3 in the chroot:
# .ci/sid-run ruby -Ilib -Itest test/io_event/test_async_stall.rb).
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "rbconfig"

require_relative "libraries"

ASYNC_STALL_MISSING = IOEventTestLibraries.missing("Async/io-event", "async", "io/event")

class TestAsyncStall < Minitest::Test
  LIB = File.expand_path("../../lib", __dir__)

  def setup
    skip ASYNC_STALL_MISSING if ASYNC_STALL_MISSING
  end

  def run_child(code, env = {})
    out = IO.popen({ "IO_EVENT_SELECTOR" => "Farce" }.merge(env), [RbConfig.ruby, "-I", LIB, "-e", code],
                   err: %i[child out], &:read)
    [out, $?]
  end

  # busy spins for s seconds of the thread's CPU time (see TestStall#busy:
  # by the clock, a starved machine left the watchdog too little of it)
  PRELUDE = <<~RUBY
    require "async"
    require "farce/io_event"
    def busy(s) = (t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID); nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < s)
  RUBY

  # FARCE_STALL_MS: a task that busy-loops is reported once, at its line,
  # through the default on_stall; a task that sleeps is not.
  def test_a_busy_task_is_reported_once
    out, status = run_child(PRELUDE + <<~RUBY, "FARCE_STALL_MS" => "100")
      Sync do |task|
        puts "selector=\#{Fiber.scheduler.instance_variable_get(:@selector).class}"
        task.async { 20.times { sleep 0.005 } }
        task.async do
          sleep 0.01
          busy(0.3) # line 6
        end
      end
    RUBY
    assert status.success?, out
    assert_match(/^selector=Farce::IOEventSelector$/, out)
    lines = out.lines.grep(/held the event loop/)
    assert_equal 1, lines.size, out
    assert_match(/ at -e:(3|9):in /, lines.first)
  end

  # idle_duration stays the time the last select slept in the kernel. The
  # longest of five 0.2 s sleeps: a loop that reached its select 100 ms
  # late (the process stopped on a busy machine) slept only the rest,
  # rightly reported as such.
  def test_idle_duration_with_stall_detection_on
    out, status = run_child(PRELUDE + <<~RUBY, "FARCE_STALL_MS" => "100")
      Sync do
        idle = 5.times.map { sleep 0.2; Fiber.scheduler.instance_variable_get(:@selector).idle_duration }
        puts "idle=\#{idle.max}"
      end
    RUBY
    assert status.success?, out
    idle = out[/^idle=([\d.e-]+)$/, 1]
    refute_nil idle, out
    assert_operator Float(idle), :>=, 0.1
    assert_operator Float(idle), :<, 5
  end

  # Turns: a ticker task gets turns while another task reads, one byte at
  # a time, a socket that always has data (its reads never block).
  def test_ticker_ticks_while_a_task_reads_a_socket_that_always_has_data
    out, status = run_child(PRELUDE + <<~RUBY)
      require "socket"
      reader, writer = UNIXSocket.pair
      buffered = 0
      loop do
        n = writer.write_nonblock("x" * 4096, exception: false)
        break if n == :wait_writable
        buffered += n
      end
      to_read = [buffered - 4096, 50_000].min
      Sync do |task|
        ticks = 0
        stop = false
        task.async { until stop; sleep 0.001; ticks += 1; end }
        sleep 0.005
        before = ticks
        to_read.times { reader.sysread(1) }
        puts "to_read=\#{to_read} ticks_during=\#{ticks - before}"
        stop = true
      end
    RUBY
    assert status.success?, out
    assert_operator out[/to_read=(\d+)/, 1].to_i, :>, 10_000, out
    assert_operator out[/ticks_during=(\d+)/, 1].to_i, :>=, 1, out
  end
end
