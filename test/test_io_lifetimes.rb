# frozen_string_literal: true

require_relative "test_helper"

# IO objects whose identity changes under a wait: dropped without close
# (finalized, their number reused by a new IO), reopened onto another
# file, switched back to blocking mode. Waits follow the IO as it is now
# and never hang; each case runs in a child process.
class TestIOLifetimes < Minitest::Test
  # IOs waited on and then dropped without close are finalized:
  # the descriptor count returns to its baseline after GC.
  def test_dropped_ios_are_finalized
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 120)
        require "farce"
        require "socket"
        def fds = Dir.children("/proc/self/fd").size
        baseline = nil
        Farce.run(backend: :#{b}) do
          GC.start
          baseline = fds
          10.times do
            Array.new(500) { UNIXSocket.pair }.each do |a, c|
              a.wait_writable(1)
              c.wait_writable(1)
            end
          end
          Fiber.schedule { sleep 0.2 } # a loop iteration or two (close scans)
          sleep 0.2
          3.times { GC.start }
          sleep 0.2
          3.times { GC.start }
          puts "baseline=\#{baseline} after=\#{fds}"
        end
      RUBY
      assert status.success?, "#{b}: #{out}"
      baseline, after = out.scan(/baseline=(\d+) after=(\d+)/).first.map(&:to_i)
      assert_operator after, :<=, baseline + 10, "#{b}: descriptors leaked: #{out}"
    end
  end

  # The descriptor table does not keep IOs alive, so a collected IO's
  # number (and often its address) comes back with a new IO: waits on the
  # new one must see it as new (registered afresh), never hang.
  def test_reused_numbers_after_gc_are_new_ios
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 60)
        require "farce"
        ok = 0
        Farce.run(backend: :#{b}) do
          300.times do |i|
            r, w = IO.pipe
            Fiber.schedule { sleep 0.001; w.write("x") }
            ok += 1 if r.wait_readable(5) && r.read_nonblock(1) == "x"
            r = w = nil
            GC.start if i % 3 == 0
          end
        end
        puts "ok=\#{ok}"
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/ok=300/, out, b)
    end
  end

  # `IO#reopen` onto another open file keeps the IO object and
  # the number; a wait afterwards must follow the new file.
  def test_reopen_after_a_wait_follows_the_new_file
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        got = nil
        Farce.run(backend: :#{b}) do
          r1, w1 = IO.pipe
          r2, w2 = IO.pipe
          w1.write("a")
          r1.wait_readable(1)
          r1.read_nonblock(1)
          r1.reopen(r2)
          Fiber.schedule { sleep 0.1; w2.write("b") }
          got = r1.wait_readable(3) && r1.read_nonblock(1)
        end
        puts "got=\#{got.inspect}"
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/got="b"/, out, b)
    end
  end

  # `io.nonblock = false` after a wait: a read must not block the
  # whole loop (the cached blocking flag would have it read first).
  def test_nonblock_false_after_a_wait_does_not_block_the_loop
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        require "io/nonblock"
        got = nil
        ticks = 0
        Farce.run(backend: :#{b}) do
          r, w = IO.pipe
          w.write("a")
          r.wait_readable(1)
          r.read(1)
          r.nonblock = false
          Fiber.schedule { got = r.read(1) }
          Fiber.schedule { 5.times { sleep 0.05; ticks += 1 }; w.write("b") }
        end
        puts "got=\#{got.inspect} ticks=\#{ticks}"
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/got="b" ticks=5/, out, b)
    end
  end
end
