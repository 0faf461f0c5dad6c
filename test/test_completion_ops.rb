# frozen_string_literal: true

require_relative "test_helper"

# Operations the kernel or a worker thread carries out while the fiber is
# parked (io_uring reads, offloaded preads): the IO::Buffer stays locked
# while one runs and unlocks when it ends or is interrupted, a scheduler
# collected with operations in flight frees nothing the kernel still
# writes to, and their results survive GC and Fiber#kill. Anything that
# could hang or corrupt memory runs in a child process.
class TestCompletionOps < Minitest::Test
  # An io_uring read interrupted by Timeout must unlock its buffer.
  def test_interrupted_uring_read_unlocks_the_buffer
    each_backend(%i[io_uring]) do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        require "timeout"
        Farce.run(backend: :#{b}) do
          r, w = IO.pipe
          buf = IO::Buffer.new(64)
          Timeout.timeout(0.05) { buf.read(r, 1) } rescue nil
          begin
            buf.resize(128)
            puts "resized locked=\#{buf.locked?}"
          rescue IO::Buffer::LockedError => e
            puts "LockedError: \#{e.message}"
          end
          w.close
        end
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/resized locked=false/, out, b)
    end
  end

  # A scheduler dropped without close while io_uring reads are in
  # flight: no pin may be released before the kernel's completion is reaped.
  # The reads are left in flight by a loop that stopped on an exception; the
  # scheduler is collected, its buffers freed; data then arrives. Seen on
  # today's code with the coop and plain ring setups (completions are not
  # deferred to the submitter): "malloc_consolidate(): unaligned fastbin
  # chunk detected" (the kernel wrote into freed heap memory), or bytes
  # consumed by an orphaned read. (defer rings run the reads only when the
  # ring is entered, and the release cancels them first.)
  def test_scheduler_collected_with_operations_in_flight
    each_backend(%i[io_uring]) do |b|
      %w[defer coop plain].each do |setup|
        out, status = ruby_subprocess(<<~RUBY, timeout: 30, env: { "FARCE_IO_URING_SETUP" => setup })
          require "farce"
          #{OFFSET_DEFINITION}
          pipes = Array.new(20) { IO.pipe }
          s = Farce::Scheduler.new(backend: :#{b})
          pipes.each do |r, _| # the second read of each is a completion operation
            Fiber.new(blocking: false) { 2.times { s.io_read(r, IO::Buffer.new(64), 1, *OFFSET) } }.resume
          end
          Fiber.new(blocking: false) do
            s.kernel_sleep(0.05)
            pipes.each { |_, w| w.write("a") }
            s.kernel_sleep(0.2)
            raise "stop"
          end.resume
          begin
            s.run
          rescue RuntimeError
          end
          s = nil
          4.times { GC.start }
          pipes.each { |_, w| w.write("z") } # orphaned reads could complete now
          sleep 0.1
          Farce::Scheduler.new(backend: :#{b}).close # releases orphaned cores
          4.times { GC.start }
          lost = pipes.count do |r, _|
            !(r.wait_readable(1) && r.read_nonblock(1, exception: false) == "z")
          end
          puts "lost=\#{lost}"
        RUBY
        assert status.success?, "#{b}/#{setup}: #{out} (#{status.inspect})"
        assert_match(/lost=0/, out, "#{b}/#{setup}")
      end
    end
  end

  # A pread offloaded to a worker thread locks the IO::Buffer for
  # the whole transfer, so another fiber cannot resize or free it.
  def test_offloaded_pread_locks_the_buffer
    each_backend do |b|
      seen_locked = false
      resize_error = nil
      farce_on(b) do |s|
        zero = File.open("/dev/zero", "rb")
        buf = IO::Buffer.new(64 << 20)
        done = false
        Fiber.schedule do
          4.times { s.io_pread(zero, buf, 0, buf.size, 0) }
        ensure
          done = true
        end
        Fiber.schedule do
          until done
            if buf.locked?
              seen_locked = true
              begin
                buf.resize(16)
              rescue IO::Buffer::LockedError => e
                resize_error = e
              end
              break
            end
            sleep 0.001
          end
        end
      end
      assert seen_locked, "#{b}: the buffer was never locked while a worker read into it"
      assert_kind_of IO::Buffer::LockedError, resize_error, b
    end
  end

  # Fiber#kill (Ruby 3.3+) unwinding through a parked completion
  # operation kills the fiber: its ensure runs, nothing is rescued, the read
  # does not go on. (The kill may finish after the operation's cancellation
  # is reaped, so the fiber may still be alive right after Fiber#kill.)
  def test_fiber_kill_through_a_parked_operation
    needs_ruby("3.3")
    each_backend(%i[io_uring]) do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        state = []
        Farce.run(backend: :#{b}) do
          r, w = IO.pipe
          f = Fiber.schedule do
            r.read(1)
            state << :read
          rescue Exception => e
            state << e.class
          ensure
            state << :ensure
          end
          Fiber.schedule { sleep 0.05; f.kill }
          Fiber.schedule { sleep 0.3; w.write("x"); state << (f.alive? ? :alive : :dead) }
        end
        puts "state=\#{state.inspect}"
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/state=\[:ensure, :dead\]/, out, b)
    end
  end

  # io_uring reads under GC.stress: the completions handed back
  # (resume_completion) stay reachable while they are used.
  def test_completion_results_under_gc_stress
    each_backend(%i[io_uring]) do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 120)
        require "farce"
        bad = 0
        Farce.run(backend: :#{b}) do
          pairs = Array.new(4) { IO.pipe }
          pairs.each_with_index do |(r, _), i|
            Fiber.schedule { 12.times { |k| bad += 1 unless r.read(2) == "%02d" % ((i + k) % 100) } }
          end
          GC.stress = true
          12.times { |k| pairs.each_with_index { |(_, w), i| w.write("%02d" % ((i + k) % 100)) }; sleep 0 }
        ensure
          GC.stress = false
        end
        puts "bad=\#{bad}"
      RUBY
      assert status.success?, "#{b}: #{out}"
      assert_match(/bad=0/, out, b)
    end
  end
end
