# frozen_string_literal: true

require_relative "test_helper"
require "tempfile"
require "io/nonblock"

class TestIO < Minitest::Test
  def test_pipe_ping_pong
    farce do
      r1, w1 = IO.pipe
      r2, w2 = IO.pipe
      Fiber.schedule do
        while (b = r1.read(1))
          w2.write(b)
        end
        w2.close
      end
      1000.times { |i| w1.write((i % 256).chr); assert_equal((i % 256).chr, r2.read(1)) }
      w1.close
      assert_nil r2.read(1)
    end
  end

  def test_large_transfer_through_a_pipe_both_directions_block
    data = Random.new(1).bytes(1_000_000)
    received = nil
    farce do
      r, w = IO.pipe
      Fiber.schedule { received = r.binmode.read; r.close }
      w.write(data) # far more than the pipe holds: the writer parks
      w.close
    end
    assert_equal data.bytesize, received.bytesize
    assert data == received, "the bytes must arrive unchanged" # no diff of a megabyte
  end

  def test_readpartial_and_gets
    farce do
      r, w = IO.pipe
      Fiber.schedule { w.write("line one\nline two\n"); sleep 0.01; w.write("tail"); w.close }
      assert_equal "line one\n", r.gets
      assert_equal "line two\n", r.gets
      assert_equal "tail", r.readpartial(100)
      assert_raises(EOFError) { r.readpartial(100) }
    end
  end

  def test_tcp_echo_many_clients
    results = []
    farce do
      server = TCPServer.new("127.0.0.1", 0)
      port = server.addr[1]
      Fiber.schedule do
        20.times do
          client = server.accept
          Fiber.schedule do
            while (line = client.gets)
              client.write(line.upcase)
            end
            client.close
          end
        end
      end
      20.times.map do |i|
        Fiber.schedule do
          sock = TCPSocket.new("127.0.0.1", port)
          sock.write("hello #{i}\n")
          results << sock.gets
          sock.close
        end
      end
    end
    assert_equal 20.times.map { |i| "HELLO #{i}\n" }.sort, results.sort
  end

  def test_unix_socketpair
    farce do
      a, b = UNIXSocket.pair
      Fiber.schedule { b.write(b.read(5).reverse) }
      a.write("hello")
      assert_equal "olleh", a.read(5)
    end
  end

  def test_io_wait_with_timeout
    farce do
      r, w = IO.pipe
      t = monotonic
      assert_nil r.wait_readable(0.05)
      assert_operator monotonic - t, :>=, 0.045
      w.write("x")
      assert_equal r, r.wait_readable(1)
      assert_equal w, w.wait_writable(0)
    end
  end

  # A zero timeout asks "is there anything now?", which keep-alive pools and
  # protocol libraries ask to know whether a connection is clean. After one
  # that found the IO empty, the native loop answered nil to the next ones
  # until it polled again, bytes or not (IO.select said ready meanwhile).
  # The socket's bytes come from another thread, which the fiber lets run
  # without giving the loop a turn (Thread.pass asks no hook).
  def test_a_zero_timeout_wait_answers_for_this_instant
    farce do
      r, w = IO.pipe
      assert_nil r.wait_readable(0)
      w.write("1")
      assert_equal r, r.wait_readable(0), "bytes written since the last zero-timeout wait"
      assert_equal [[r], [], []], IO.select([r], nil, nil, 0)
      assert_equal "1", r.read(1)
      assert_nil r.wait_readable(0), "read since: empty again"
      w.write("2")
      sleep 0 # the loop polls: it sees the bytes come
      assert_equal "2", r.read(1)
      assert_nil r.wait_readable(0), "read since the loop saw them come"

      server = TCPServer.new("127.0.0.1", 0)
      a = TCPSocket.new("127.0.0.1", server.addr[1])
      b = server.accept
      assert_nil a.wait_readable(0)
      writer = Thread.new { b.write("3") }
      Thread.pass while writer.alive?
      # (the bytes are in a's queue when write returns on a loopback connection)
      assert_equal a, a.wait_readable(0), "bytes another thread sent since the last zero-timeout wait"
      assert_equal "3", a.read(1)
      assert_nil a.wait_readable(0)
    ensure
      [r, w, a, b, server].each { |io| io&.close }
    end
  end

  def test_io_wait_is_level_triggered
    # Data left behind after a partial read must still make the IO ready.
    farce do
      r, w = IO.pipe
      w.write("abc")
      3.times do |i|
        assert r.wait_readable(1), "wait #{i} must see the unread data"
        assert_equal "abc"[i], r.read_nonblock(1)
      end
      assert_nil r.wait_readable(0.01)
    end
  end

  def test_several_fibers_wait_on_one_descriptor_for_different_events
    farce do
      a, b = UNIXSocket.pair
      got = []
      Fiber.schedule { a.wait_readable; got << :readable }
      Fiber.schedule { a.wait_writable; got << :writable }
      Fiber.schedule { a.wait_readable; got << :readable2 }
      sleep 0.01
      b.write("x")
      sleep 0.01
      assert_equal %i[readable readable2 writable], got.sort
    end
  end

  def test_regular_files_do_not_park
    Tempfile.create("farce") do |f|
      f.write("x" * 10_000)
      f.flush
      farce do
        File.open(f.path) do |io|
          assert io.wait_readable(0)
          assert_equal 10_000, io.read.bytesize
        end
        File.open(f.path, "a") { |io| io.write("more") }
      end
      assert_equal 10_004, File.size(f.path)
    end
  end

  def test_closing_an_io_wakes_its_waiters_with_ioerror
    farce do
      r, _w = IO.pipe
      errors = []
      2.times do
        Fiber.schedule do
          r.read(1)
        rescue IOError => e
          errors << e
        end
      end
      sleep 0.01
      t = monotonic
      r.close
      sleep 0.01 until errors.size == 2 || monotonic - t > 2
      assert_equal 2, errors.size
      assert_operator monotonic - t, :<, 0.5, "waiters must be woken promptly"
    end
  end

  def test_reused_descriptor_gets_no_stale_event
    farce do
      r1, w1 = IO.pipe
      fd = r1.fileno
      woken = false
      Fiber.schedule do
        r1.read(1)
      rescue IOError
        woken = :ioerror
      end
      sleep 0.01
      r1.close
      w1.close
      # the new pipe very likely reuses the number; it must see only its own data
      r2, w2 = IO.pipe
      fiber = Fiber.schedule { woken = r2.read(1) }
      sleep 0.02
      assert_equal :ioerror, woken
      assert fiber.alive?, "the new IO must not be woken by the old one's events"
      w2.write("y")
      # (a Windows pipe read polls in steps of up to 16 ms: no fixed sleep)
      t0 = monotonic
      sleep 0.001 until woken == "y" || monotonic - t0 > 1
      assert_equal "y", woken
      assert_equal fd, r2.fileno if r2.fileno == fd
    end
  end

  # O_NONBLOCK belongs to the open file, which other processes share: a
  # pipeline's pipe inherited as $stdout, a terminal. A program that read or
  # wrote there through the scheduler must leave it as it found it, or the
  # next process of the pipeline to write gets EAGAIN (`app | head`: "head:
  # error writing 'standard output': Resource temporarily unavailable"). The
  # Ruby loop used to leave it set. A flag the program set stays set.
  def test_transfers_leave_the_descriptors_nonblocking_flag_as_they_found_it
    data = Random.new(2).bytes(300_000) # more than a pipe holds: the writer waits for room, the reader for bytes
    [false, true].product([:pipe, :socketpair]).each do |nonblocking, kind|
      r, w = kind == :pipe ? IO.pipe : UNIXSocket.pair
      r.nonblock = w.nonblock = nonblocking
      received = writer_flag = nil
      farce do
        Fiber.schedule { received = r.binmode.read }
        Fiber.schedule do
          10.times { |i| w.write("line #{i}\n") }
          w.write(data)
          writer_flag = w.nonblock?
          w.close
        end
      end
      assert_equal 10.times.map { |i| "line #{i}\n" }.join.b + data, received
      assert_equal [nonblocking] * 2, [r.nonblock?, writer_flag], "#{kind}: O_NONBLOCK of the read and write ends (was #{nonblocking})"
    ensure
      r&.close
      w&.close
    end
  end

  # Where the kernel refuses RWF_NOWAIT for pipes (before Linux 5.x, and
  # under qemu-user, which CI's arm64 step runs), a pipe whose O_NONBLOCK is
  # clear is written with write(2) once it polls writable. All 300 KB in one
  # call would wait for the reader, a fiber of this same thread, for ever
  # (Ruby 3.1's suite hung there under qemu); FARCE_PIPE_NOWAIT=0 takes that
  # path on any kernel.
  def test_a_blocking_pipe_without_rwf_nowait_never_blocks_the_thread
    out, status = ruby_subprocess(<<~RUBY, timeout: 20, env: { "FARCE_PIPE_NOWAIT" => "0" })
      require "farce"
      data = Random.new(3).bytes(300_000)
      r, w = IO.pipe
      r.nonblock = w.nonblock = false
      received = ticks = writer_flag = nil
      Farce.run do
        Fiber.schedule { received = r.binmode.read }
        Fiber.schedule { w.write(data); writer_flag = w.nonblock?; w.close }
        Fiber.schedule { ticks = 0; (ticks += 1; sleep 0.001) until received }
      end
      puts received == data ? "same bytes" : "different bytes: \#{received&.bytesize}"
      puts "flags kept" unless r.nonblock? || writer_flag
      puts "the ticker ran" if ticks.positive?
    RUBY
    assert status.success?, out
    assert_equal ["same bytes", "flags kept", "the ticker ran"], out.lines.map(&:chomp)
  end

  # The report's reproduction: $stdout is a blocking pipe, as a shell hands
  # it to the first process of a pipeline.
  def test_writing_to_stdout_leaves_a_blocking_pipe_blocking
    out, status = ruby_subprocess(<<~RUBY)
      require "farce"
      require "io/nonblock"
      r, w = IO.pipe
      w.nonblock = false
      saved = $stdout.dup
      $stdout.reopen(w)
      Farce.run(backend: :#{backend}) { Fiber.schedule { 10.times { |i| $stdout.write("line \#{i}\\n") } } }
      $stdout.flush
      $stdout.reopen(saved)
      nonblocking = w.nonblock?
      w.close
      puts "lines=\#{r.read.lines.size} nonblocking=\#{nonblocking}"
    RUBY
    assert status.success?, out
    assert_equal "lines=10 nonblocking=false\n", out
  end

  def test_io_wait_on_closed_io_raises
    farce do
      r, w = IO.pipe
      r.close
      assert_raises(IOError) { r.wait_readable(0) }
      w.close
    end
  end

  def test_write_to_closed_pipe_raises_epipe
    farce do
      r, w = IO.pipe
      r.close
      assert_raises(Errno::EPIPE) { w.write("x" * 100_000) }
    end
  end

  def test_no_descriptor_leak
    # Schedulers earlier tests dropped without close are collected, then
    # released by the next Scheduler.new, before the first count. The Go
    # runtime's own poller is opened once, when the core loads
    # (runtime_settings.go).
    GC.start
    Farce::Scheduler.new(backend: backend).close
    before = open_descriptors
    5.times do
      farce do
        r, w = IO.pipe
        Fiber.schedule { r.read(1); r.close }
        w.write("x")
        w.close
      end
    end
    assert_no_descriptor_left_open(before, "five schedulers, each reading a pipe,")
  end
end
