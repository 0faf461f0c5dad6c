# frozen_string_literal: true

require_relative "test_helper"

# A descriptor's registration belongs to the open file it was made for, not
# to its number. C libraries (libmariadb under mysql2) close(2) or dup2(2)
# a descriptor behind the Ruby IO that waits on it and get the same number
# back for their next file; mysql2 waits through a fresh IO made from the
# number each time. A wait on a number whose file changed is armed afresh
# on the new file, and fibers still parked on the old file wake with an
# IOError that names the descriptor instead of sleeping forever or taking
# the new file's readiness. Each case runs in a child process with a
# deadline, on every backend (the Ruby loop included) and through the
# io-event selector.
class TestDescriptorFileIdentity < Minitest::Test
  include FarceTestHelper

  ALL_BACKENDS = (NATIVE_BACKENDS + [:ruby]).freeze

  # Long enough that no loaded machine reaches it when the fix works; the
  # assertions compare against half of it, never against a tight bound.
  LONG = 20

  def run_child(code, backend)
    out, status = ruby_subprocess(code, timeout: 3 * LONG + 30)
    assert status.success?, "#{backend}: #{out}"
    out
  end

  # The issue's reproduction: the wait on the reused number answers.
  def test_number_closed_behind_the_io_and_reused_is_armed_afresh
    each_backend(ALL_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        require "farce"
        require "socket"
        got = nil
        Farce.run(backend: :#{b}) do
          a, b = UNIXSocket.pair
          Fiber.schedule { sleep 0.05; b.write "x" }
          a.wait_readable(#{LONG})   # registers the descriptor
          IO.for_fd(a.fileno).close  # close(2) behind a's back
          a.autoclose = false
          c, d = UNIXSocket.pair     # gets a's old number
          puts "reused=\#{c.fileno == a.fileno}"
          Fiber.schedule { sleep 0.05; d.write "y" }
          got = c.wait_readable(#{LONG}).equal?(c) && c.read_nonblock(1)
        end
        puts "got=\#{got.inspect}"
      RUBY
      skip "#{b}: the new socket did not get the old number" unless out.include?("reused=true")
      assert_includes out, 'got="y"', b
    end
  end

  # A fiber still parked on the old file (what a Timeout leaves inside a
  # mysql2 query): the new wait on the number answers at once instead of
  # after the old wait's timeout (or never), and the old fiber gets an
  # IOError naming the descriptor. Both wait through fresh IOs made from
  # the number, as mysql2 does.
  def test_fiber_parked_on_the_old_file_wakes_with_an_error_and_the_new_wait_answers
    each_backend(ALL_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        require "farce"
        require "socket"
        mono = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
        old = got = took = nil
        Farce.run(backend: :#{b}) do
          a, _peer = UNIXSocket.pair
          fd = a.fileno
          Fiber.schedule do
            old = begin
              IO.for_fd(fd, autoclose: false).wait_readable(#{LONG})
            rescue IOError, Errno::EBADF => e
              e
            end
          end
          IO.for_fd(fd).close        # the parked fiber's file, closed behind its back
          a.autoclose = false
          c, d = UNIXSocket.pair
          puts "reused=\#{c.fileno == fd}"
          Fiber.schedule { sleep 0.05; d.write "y" }
          t = mono.()
          got = IO.for_fd(fd, autoclose: false).wait_readable(#{LONG}) ? c.read_nonblock(1) : nil
          took = mono.() - t
          puts "fd=\#{fd}"
        end
        puts "got=\#{got.inspect} took=\#{took}"
        puts "old=\#{old.class}: \#{old.message rescue old.inspect}"
      RUBY
      skip "#{b}: the new socket did not get the old number" unless out.include?("reused=true")
      fd = out[/fd=(\d+)/, 1]
      assert_includes out, 'got="y"', "#{b}: the new wait: #{out}"
      took = out[/took=([\d.e-]+)/, 1].to_f
      assert_operator took, :<, LONG / 2.0, "#{b}: the new wait waited for the old one: #{out}"
      assert_match(/old=(IOError|Errno::EBADF): .*descriptor #{fd}\b/, out, "#{b}: the old fiber: #{out}")
    end
  end

  # The same, with the loop given a turn inside the old fiber's wait hook,
  # before that hook looked at the descriptor: a turn budget of a
  # nanosecond gives one at every hook that would not block, as a machine
  # slow enough does at the default half millisecond (qemu-user's arm64
  # emulation did, every time). The thread's own fiber closes the number
  # and reuses it within that turn; the old fiber asked for a wait on the
  # file the number named when it called, so it gets the IOError, not the
  # new file's readiness.
  def test_a_turn_inside_the_wait_hook_keeps_the_file_the_wait_was_asked_for
    each_backend(ALL_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        require "farce"
        require "socket"
        old = got = nil
        Farce.run(backend: :#{b}, turn_budget: 1e-9) do
          a, _peer = UNIXSocket.pair
          fd = a.fileno
          Fiber.schedule do
            old = begin
              IO.for_fd(fd, autoclose: false).wait_readable(#{LONG})
            rescue IOError, Errno::EBADF => e
              e
            end
          end
          IO.for_fd(fd).close        # inside the turn the old fiber's hook gave
          a.autoclose = false
          c, d = UNIXSocket.pair
          puts "reused=\#{c.fileno == fd}"
          d.write "y"                # the new file is readable from the start
          got = IO.for_fd(fd, autoclose: false).wait_readable(#{LONG}) ? c.read_nonblock(1) : nil
          puts "fd=\#{fd}"
        end
        puts "got=\#{got.inspect}"
        puts "old=\#{old.class}: \#{old.message rescue old.inspect}"
      RUBY
      skip "#{b}: the new socket did not get the old number" unless out.include?("reused=true")
      fd = out[/fd=(\d+)/, 1]
      assert_includes out, 'got="y"', "#{b}: the new wait: #{out}"
      assert_match(/old=(IOError|Errno::EBADF): .*descriptor #{fd}\b/, out, "#{b}: the old fiber: #{out}")
    end
  end

  # Another thread's IO#close can land between the Ruby loop's `closed?`
  # and `fileno` on some IO it holds a wait for (the GVL may pass at the
  # branch between them), when a wait on a reused number makes it look
  # through the other waits. fileno then raised IOError into the fiber that
  # asked about another IO (seen in the wait stress run). Here the parked
  # IO answers as such an IO does in that window: `closed?` false, then
  # `fileno` raising, every time. (A real close cannot stand in: Ruby 4.0's
  # IO#close waits for the parked fiber to leave, and from inside the hook
  # nothing can run it.) The native loops read no Ruby `closed?`.
  def test_an_io_closed_while_the_ruby_loop_looks_at_it_raises_nothing_in_another_fiber
    out = run_child(<<~RUBY, :ruby)
      require "farce"
      require "socket"
      old = got = nil
      Farce.run(backend: :ruby) do
        a, a_peer = UNIXSocket.pair
        x, x_peer = UNIXSocket.pair
        fd = x.fileno
        x.wait_readable(0.001)       # the number is claimed for x's file
        x_peer.close
        x.close
        Fiber.schedule { old = a.wait_readable(#{LONG}) }
        def a.closed? = false
        def a.fileno = raise(IOError, "closed stream")
        c, d = UNIXSocket.pair       # x's old number: its wait looks at a
        puts "reused=\#{c.fileno == fd}"
        d.write "y"
        got = c.wait_readable(#{LONG}) ? c.read_nonblock(1) : nil
        a.singleton_class.send(:remove_method, :closed?, :fileno)
        a_peer.write "z"             # the parked fiber ends as it would have
      end
      puts "got=\#{got.inspect}"
      puts "old=\#{old.class}"
    RUBY
    skip "the new socket did not get the old number" unless out.include?("reused=true")
    assert_includes out, 'got="y"', out
    assert_includes out, "old=UNIXSocket", out
  end

  # A write whose hook gives the loop a turn (the native loop's, owed by
  # the write before it; the Ruby loop's, at each write's start): the number
  # is closed and reused within that turn, and the bytes must not go to the
  # new file (they reached the new socket's peer).
  def test_a_turn_inside_a_write_hook_does_not_write_to_the_new_file
    each_backend(ALL_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        require "farce"
        require "socket"
        old = leaked = err = nil
        Farce.run(backend: :#{b}, turn_budget: 1e-9) do
          a, a_peer = UNIXSocket.pair
          fd = a.fileno
          Fiber.schedule do
            w = IO.for_fd(fd, autoclose: false)
            w.sync = true
            w.write "a"
            w.write "b"
          rescue IOError, Errno::EBADF => e
            err = e
          end
          IO.for_fd(fd).close        # inside the turn one of those writes gave
          a.autoclose = false
          c, d = UNIXSocket.pair
          puts "reused=\#{c.fileno == fd}"
          sleep 0.1                  # the old fiber's write goes on meanwhile
          old = a_peer.read_nonblock(9, exception: false)
          leaked = d.read_nonblock(9, exception: false)
          puts "fd=\#{fd}"
          c.close
        end
        puts "old=\#{old.inspect} leaked=\#{leaked.inspect}"
        puts "err=\#{err.class}: \#{err.message rescue err.inspect}"
      RUBY
      skip "#{b}: the new socket did not get the old number" unless out.include?("reused=true")
      fd = out[/fd=(\d+)/, 1]
      assert_includes out, "leaked=:wait_readable", "#{b}: the old file's bytes reached the new file: #{out}"
      assert_match(/err=(IOError|Errno::EBADF): .*descriptor #{fd}\b/, out, "#{b}: the old fiber: #{out}")
    end
  end

  # The other side of the two tests above: a turn inside a hook on a pipe
  # or a file whose number still names the same open file raises nothing.
  # Every read and write here gives a turn (the budget is spent at once).
  # On Windows a pipe's stat gives another inode each time, and the Ruby
  # loop once took that for a new file and raised IOError mid-read.
  def test_turns_inside_hooks_on_an_unchanged_pipe_or_file_raise_nothing
    each_backend(ALL_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        require "farce"
        require "tempfile"
        got = []
        file = nil
        errors = []
        Farce.run(backend: :#{b}, turn_budget: 1e-9) do
          r, w = IO.pipe
          Fiber.schedule do
            4.times { got << r.read(1) }
          rescue IOError, SystemCallError => e
            errors << e
          end
          Fiber.schedule do
            4.times { |i| w.write(i.to_s); sleep 0 }
          rescue IOError, SystemCallError => e
            errors << e
          end
          Tempfile.create("identity") do |f|
            f.binmode
            4.times { |i| f.write(i.to_s) }
            f.flush
            f.rewind
            file = f.read
          rescue IOError, SystemCallError => e
            errors << e
          end
        end
        puts "got=\#{got.inspect} file=\#{file.inspect} errors=\#{errors.map { |e| "\#{e.class}: \#{e.message}" }.inspect}"
      RUBY
      assert_includes out, 'got=["0", "1", "2", "3"] file="0123" errors=[]', "#{b}: #{out}"
    end
  end

  # dup2(2) over a registered descriptor while another reference keeps the
  # old file open: the kernel keeps the old registration (epoll drops it
  # only with the file's last reference), and its events must neither wake
  # the wait on the new file nor hide the new file's own readiness.
  def test_dup2_over_a_registered_descriptor_follows_the_new_file
    each_backend(ALL_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        require "farce"
        require "socket"
        early = got = nil
        Farce.run(backend: :#{b}) do
          a, a_peer = UNIXSocket.pair
          fd = a.fileno
          Fiber.schedule { sleep 0.05; a_peer.write "x" }
          a.wait_readable(#{LONG})
          a.read_nonblock(1)                    # registered, and drained
          keep = a.dup                          # the old file stays open
          n, n_peer = UNIXSocket.pair
          IO.for_fd(fd, autoclose: false).reopen(n) # dup2(n, fd) behind a's back
          a.autoclose = false
          waiter = Fiber.schedule do
            got = IO.for_fd(fd, autoclose: false).wait_readable(#{LONG}) ? IO.for_fd(fd, autoclose: false).read_nonblock(9) : nil
          end
          a_peer.write "old"                    # the old file's edge: not the new file's readiness
          sleep 0.2                             # the loop polls (and would hand it out)
          early = got
          n_peer.write "new"
          sleep 0.01 while got.nil? && waiter.alive?
          keep.close
        end
        puts "early=\#{early.inspect} got=\#{got.inspect}"
      RUBY
      assert_includes out, "early=nil", "#{b}: woken by the old file: #{out}"
      assert_includes out, 'got="new"', "#{b}: #{out}"
    end
  end

  # IO#reopen keeps the IO object and the number of a registered IO and
  # puts another file behind them: the wait through that same IO follows the
  # new file (epoll kept waiting on the old file's registration, which the
  # kernel had dropped with the file).
  def test_reopen_of_a_registered_io_follows_the_new_file
    each_backend(ALL_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        require "farce"
        got = nil
        Farce.run(backend: :#{b}) do
          r1, w1 = IO.pipe
          r2, w2 = IO.pipe
          Fiber.schedule { sleep 0.05; w1.write("a") }
          r1.wait_readable(#{LONG})  # parks: registered
          r1.read_nonblock(1)
          r1.reopen(r2)
          Fiber.schedule { sleep 0.05; w2.write("b") }
          got = r1.wait_readable(#{LONG}) && r1.read_nonblock(1)
        end
        puts "got=\#{got.inspect}"
      RUBY
      assert_includes out, 'got="b"', "#{b}: #{out}"
    end
  end

  # The same through Farce::IOEventSelector (Async's path): a fiber parked
  # on the old file wakes with IOError, the wait on the reused number gets
  # the new file's readiness.
  def test_io_event_selector_on_a_number_closed_behind_its_io_and_reused
    each_backend(NATIVE_BACKENDS) do |b|
      out = run_child(<<~RUBY, b)
        ENV["FARCE_BACKEND"] = "#{b}"
        require "farce"
        require "socket"
        selector = Farce::IOEventSelector.new(Fiber.current)
        a, a_peer = UNIXSocket.pair
        fd = a.fileno
        waiter = lambda do |io, into|
          f = Fiber.new do
            into << begin
              selector.io_wait(f, io, IO::READABLE)
            rescue IOError, Errno::EBADF => e
              e
            end
            selector.loop.transfer
          end
          f.transfer
        end
        first = []
        waiter.(a, first)
        a_peer.write "x"
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + #{LONG}
        selector.select(0.05) while first.empty? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        a.read_nonblock(1)
        old = []
        waiter.(IO.for_fd(fd, autoclose: false), old)  # parked on the old file
        IO.for_fd(fd).close                            # close(2) behind a's back
        a.autoclose = false
        c, d = UNIXSocket.pair
        puts "reused=\#{c.fileno == fd}"
        fresh = []
        waiter.(IO.for_fd(fd, autoclose: false), fresh)
        d.write "y"
        selector.select(0.05) while (fresh.empty? || old.empty?) && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        puts "first=\#{first.inspect} fresh=\#{fresh.inspect}"
        puts "old=\#{old.first.class}: \#{old.first.message rescue old.inspect} fd=\#{fd}"
        selector.close
      RUBY
      skip "#{b}: the new socket did not get the old number" unless out.include?("reused=true")
      fd = out[/fd=(\d+)/, 1]
      assert_includes out, "first=[1]", "#{b}: #{out}"
      assert_includes out, "fresh=[1]", "#{b}: the new wait: #{out}"
      assert_match(/old=(IOError|Errno::EBADF): .*descriptor #{fd}\b/, out, "#{b}: the old fiber: #{out}")
    end
  end
end
