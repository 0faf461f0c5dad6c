# frozen_string_literal: true

require_relative "test_helper"

class TestScaleAndGC < Minitest::Test
  def test_ten_thousand_concurrent_fibers
    done = 0
    t = monotonic
    # no turn budget: the spawner holds the loop, so every sleep is still pending after it
    Farce.run(backend: backend, turn_budget: nil) do
      10_000.times { Fiber.schedule { sleep 0.05; done += 1 } }
      stats = Fiber.scheduler.stats
      assert_operator stats[:pending_waits], :>=, 10_000
      assert_operator stats[:timers], :>=, 10_000
    end
    assert_equal 10_000, done
    assert_operator monotonic - t, :<, 10
  end

  def test_ten_thousand_fibers_on_pipes
    n = 2_000 # 4,000 descriptors
    soft, hard = Process.getrlimit(:NOFILE)
    Process.setrlimit(:NOFILE, [[hard, 8192].min, hard].min, hard) if soft < 8192
    received = 0
    # no turn budget: a fiber that would give the loop a turn in its first
    # read is not yet registered when the spawner counts
    Farce.run(backend: backend, turn_budget: nil) do
      pipes = Array.new(n) { IO.pipe }
      pipes.each { |r, _| Fiber.schedule { byte = r.read(1); received += byte.size } }
      assert_equal n, Fiber.scheduler.stats[:registered_descriptors]
      pipes.each { |_, w| w.write("x") }
      Fiber.schedule { sleep 0.001 until received == n; pipes.flatten.each(&:close) }
    end
    assert_equal n, received
  end

  def test_gc_stress_smoke
    got = []
    farce do
      GC.stress = true
      begin
        r, w = IO.pipe
        q = Queue.new
        Fiber.schedule { 3.times { got << r.read(1) } }
        Fiber.schedule { 3.times { |i| q << i; sleep 0.001 } }
        Fiber.schedule { 3.times { got << q.pop } }
        3.times { |i| w.write(i.to_s); sleep 0 }
      ensure
        GC.stress = false
      end
    end
    assert_equal %w[0 1 2], got.grep(String)
    assert_equal [0, 1, 2], got.grep(Integer)
  end

  def test_gc_compact_while_fibers_are_parked
    skip "GC.compact is unavailable" unless GC.respond_to?(:compact)
    results = []
    farce do
      pipes = Array.new(50) { IO.pipe }
      pipes.each_with_index { |(r, _), i| Fiber.schedule { results << [i, r.read(1)] } }
      50.times { Fiber.schedule { sleep 0.01 } }
      GC.start
      GC.compact
      pipes.each_with_index { |(_, w), i| w.write((i % 10).to_s) }
    end
    assert_equal 50, results.size
    results.each { |i, s| assert_equal((i % 10).to_s, s) }
  end

  # The descriptor table remembers IOs without marking them and trusts an
  # unchanged GC count as proof that one is alive. A sighting while an
  # incremental GC marks is no proof: the IO can be closed, dropped, and
  # freed by that GC's sweep with the count unchanged. A new socket on the
  # same descriptor then made farce read the old IO's slot, reused by a
  # String (Ruby 3.4: SEGV at 0x14, 3 of 3 runs). In a child process.
  def test_a_descriptor_reused_after_its_io_was_freed_in_the_same_gc
    code = <<~RUBY
      require "farce"
      keep = Array.new(400_000) { |i| [i.to_s] } # a heap that takes several steps to mark
      tried = 0
      Farce.run(backend: :#{backend}) do
        20.times do
          GC.start(full_mark: true, immediate_mark: false)
          next unless GC.latest_gc_info(:state) == :marking
          epoch = GC.count
          a, b = UNIXSocket.pair
          b.write("x")
          a.readpartial(1) # a enters the table while the GC marks
          fd = a.fileno
          marking = GC.latest_gc_info(:state) == :marking
          a.close
          a = nil
          junk = []
          junk << "abcd".dup until GC.latest_gc_info(:state) == :none || GC.count != epoch
          fill = Array.new(200_000) { "GET ".dup } # the freed slots are reused
          next b.close unless GC.count == epoch && marking
          c, d = UNIXSocket.pair
          if c.fileno == fd
            tried += 1
            d.write("y")
            got = c.readpartial(1) # farce looks at the entry a left behind
            raise "read \#{got.inspect}" unless got == "y"
          end
          [b, c, d].each(&:close)
        end
      end
      puts "tried \#{tried}"
    RUBY
    out, status = ruby_subprocess(code, timeout: 120)
    assert status.success?, "the child died: #{out.lines.first(8).join}"
    tried = out[/^tried (\d+)/, 1].to_i
    skip "no GC stayed in its marking phase long enough to set the case up" if tried.zero?
  end

  def test_go_runtime_threads_and_goroutines_stay_bounded
    skip_on_ruby_loop "has no Go runtime threads or goroutines"
    farce do
      1000.times { Fiber.schedule { sleep 0.001 } }
    end
    s = Farce::Scheduler.new(backend: backend)
    assert_operator s.stats[:goroutines], :<, 10
    s.close
    assert_operator Dir.children("/proc/self/task").size, :<, 30
  end
end
