# frozen_string_literal: true

# The child process of test/test_wait_stress.rb: a seeded random mix of
# scenarios, many at once, over every way a fiber waits in the loop
# (descriptors, untimed and timed parks, wakes from the loop's thread and
# from other threads) and every way it leaves a wait early (Timeout,
# Fiber#raise, Fiber#kill, IO#close from either thread, descriptor-number
# reuse). Each scenario checks its own outcome; the end checks that every
# fiber finished, that the loop holds no wait and no parked fiber, and that
# no descriptor leaked.
#
#   ruby -Ilib test/support/wait_stress_workload.rb SEED SCENARIOS [BACKEND]
#
# Prints "OK ..." and exits 0, or prints "FAIL ..." lines and exits 1. A
# watchdog thread prints the scenarios still running and exits 3 when the
# run takes too long (a lost wakeup); the parent kills it if even that
# cannot run.

require "farce"
require "socket"
require "timeout"

module WaitStress
  RUBY_32 = RUBY_VERSION >= "3.2" # Queue#pop(timeout:)
  RUBY_33 = RUBY_VERSION >= "3.3" # Fiber#kill
  CONCURRENCY = 48 # scenarios running at once
  LONG = 30 # seconds: "forever", for waits something else must end

  class Stop < StandardError; end

  # One scenario: its name, where it got to (printed by the watchdog), and
  # the fibers and threads it started.
  Scenario = Struct.new(:id, :name, :step, :fibers, :threads) do
    def to_s = "##{id} #{name} (at: #{step})"
  end

  class Run
    attr_reader :failures, :ops

    def initialize(seed, count)
      @rng = Random.new(seed)
      @count = count
      @failures = []
      @ops = 0
      @running = {}
      @fibers = []
      @next_id = 0
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def fail!(scenario, message)
      @failures << "#{scenario}: #{message}"
    end

    def check(scenario, ok, message)
      @ops += 1
      fail!(scenario, message) unless ok
    end

    def running = @running.values

    SCENARIOS = %i[
      stream stream stream timed_wait_expires timed_wait_ready wait_writable_expires wait_writable_ready
      queue queue queue_pop_timeout mutex mutex condition_variable sleep_timed sleep_forever_ended
      timeout_read timeout_pop raise_parked raise_parked thread_queue thread_mutex thread_condition_variable
      close_loop close_thread descriptor_reuse descriptor_reuse eof_on_close gc crowd
    ].freeze

    # Runs in the scheduler's block fiber: starts the scenarios (at most
    # CONCURRENCY at once), waits for all of them, then checks the loop.
    def call
      done = Queue.new
      active = 0
      @count.times do
        while active >= CONCURRENCY
          done.pop
          active -= 1
        end
        name = SCENARIOS[@rng.rand(SCENARIOS.size)]
        sc = Scenario.new(@next_id += 1, name, :start, [], [])
        @running[sc.id] = sc
        rng = Random.new(@rng.rand(1 << 30))
        active += 1
        @fibers << Fiber.schedule do
          send(name, sc, rng)
        rescue Exception => e # rubocop:disable Lint/RescueException
          fail!(sc, "raised #{e.class}: #{e.message}\n  #{e.backtrace.first(8).join("\n  ")}")
        ensure
          sc.threads.each { |t| t.join(LONG) || fail!(sc, "a thread did not end") }
          @running.delete(sc.id)
          done << sc.id
        end
        pace(@rng)
      end
      active.times { done.pop }
      settle
    end

    # Between scenarios: sometimes none, sometimes a turn, sometimes a short sleep.
    def pace(rng)
      case rng.rand(4)
      when 0 then nil
      when 1 then sleep(0)
      when 2 then Fiber.schedule {} # a fiber that ends at once
      else sleep(rng.rand * 0.002)
      end
    end

    # The end: every fiber done, nothing parked or pending in the loop.
    def settle
      sleep(0) # one more poll: waits cancelled by the last scenarios leave their lists
      alive = @fibers.count(&:alive?)
      @failures << "#{alive} fibers still alive at the end" unless alive.zero?
      stats = Fiber.scheduler.stats
      # the block fiber runs now: nothing else may be parked
      @failures << "stats[:parked_fibers] = #{stats[:parked_fibers]} at the end" unless stats[:parked_fibers].zero?
      @failures << "stats[:pending_waits] = #{stats[:pending_waits]} at the end" unless stats[:pending_waits].zero?
    end

    # ---- helpers ------------------------------------------------------------

    # A started fiber, tracked by its scenario.
    def spawn(sc)
      f = Fiber.schedule do
        yield
      rescue Exception => e # rubocop:disable Lint/RescueException
        fail!(sc, "a fiber raised #{e.class}: #{e.message}\n  #{e.backtrace.first(8).join("\n  ")}")
        raise if e.is_a?(SystemExit) || e.is_a?(NoMemoryError)
      end
      sc.fibers << f
      @fibers << f
      f
    end

    def pair(rng)
      rng.rand(2).zero? ? IO.pipe : UNIXSocket.pair
    end

    def close_all(*ios)
      ios.each { |io| io.close unless io.closed? }
    end

    # Until cond holds, in short sleeps (a scenario's own fibers to get somewhere).
    def wait_until(sc, what, limit = 10)
      t = now
      until yield
        if now - t > limit
          fail!(sc, "gave up waiting for #{what}")
          return false
        end
        sleep 0.0005
      end
      true
    end

    # Fills a pipe's or socket's send buffer: a write would wait now.
    def fill(w)
      chunk = "f" * 65_536
      loop { w.write_nonblock(chunk) }
    rescue IO::WaitWritable
      nil
    end

    def reader_of(rng, r, total)
      out = +"".b
      case rng.rand(4)
      when 0 # readpartial in random sizes
        out << r.readpartial(1 + rng.rand(70_000)) while out.bytesize < total
      when 1 # read exactly
        out = r.read(total) || +""
      when 2 # non-blocking reads and an untimed wait
        while out.bytesize < total
          chunk = r.read_nonblock(1 + rng.rand(70_000), exception: false)
          chunk == :wait_readable ? r.wait_readable : (out << chunk)
        end
      else # non-blocking reads and a timed wait that may expire
        while out.bytesize < total
          chunk = r.read_nonblock(1 + rng.rand(70_000), exception: false)
          chunk == :wait_readable ? r.wait_readable(rng.rand * 0.003) : (out << chunk)
        end
      end
      out
    end

    def writer_of(rng, w, data)
      pos = 0
      while pos < data.bytesize
        n = 1 + rng.rand(rng.rand(2).zero? ? 4096 : 90_000)
        part = data.byteslice(pos, n)
        if rng.rand(2).zero?
          w.write(part)
          pos += part.bytesize
        else
          r = w.write_nonblock(part, exception: false)
          if r == :wait_writable
            rng.rand(2).zero? ? w.wait_writable : w.wait_writable(rng.rand * 0.003)
          else
            pos += r
          end
        end
        sleep(rng.rand * 0.001) if rng.rand(4).zero?
      end
    end

    # ---- scenarios -------------------------------------------------------------

    # Bytes through a pipe or socketpair, reads and writes of random sizes:
    # short reads, EAGAIN then data, full buffers both ways.
    def stream(sc, rng)
      r, w = pair(rng)
      data = rng.bytes(rng.rand(2).zero? ? 1 + rng.rand(4096) : rng.rand(300_000))
      got = nil
      reader = spawn(sc) { sc.step = :read; got = reader_of(rng, r, data.bytesize) }
      sc.step = :write
      writer_of(rng, w, data)
      wait_until(sc, "the reader") { !reader.alive? }
      check(sc, got == data, "read #{got&.bytesize.inspect} bytes, not the #{data.bytesize} written (or other bytes)")
    ensure
      close_all(r, w)
    end

    # A timed wait that nothing ends (the block makes it, given its
    # timeout): it returns nil, and not before its time.
    def check_times_out(sc, rng, step, call, situation)
      t = 0.001 + rng.rand * 0.01
      t0 = now
      sc.step = step
      res = yield t
      check(sc, res.nil?, "#{call}(#{t}) #{situation} returned #{res.inspect}")
      check(sc, now - t0 >= t * 0.99, "#{call}(#{t}) returned after #{now - t0}")
    end

    # A timed descriptor wait with nothing to read ends with nil, not early.
    def timed_wait_expires(sc, rng)
      r, w = pair(rng)
      check_times_out(sc, rng, :wait, "wait_readable", "with nothing to read") { |t| r.wait_readable(t) }
    ensure
      close_all(r, w)
    end

    # A timed descriptor wait that data ends first; the data is all there.
    def timed_wait_ready(sc, rng)
      r, w = pair(rng)
      data = rng.bytes(1 + rng.rand(512))
      spawn(sc) { sleep(rng.rand * 0.003) if rng.rand(2).zero?; w.write(data) }
      sc.step = :wait
      res = r.wait_readable(LONG)
      check(sc, res, "wait_readable returned #{res.inspect} though data was written")
      got = r.read_nonblock(4096, exception: false)
      got = (r.wait_readable(LONG) && r.read_nonblock(4096, exception: false)) if got == :wait_readable
      check(sc, got == data, "read #{got.inspect[0, 40]} after the wait, not the data written")
    ensure
      close_all(r, w)
    end

    def wait_writable_expires(sc, rng)
      r, w = pair(rng)
      fill(w)
      check_times_out(sc, rng, :wait, "wait_writable", "on a full buffer") { |t| w.wait_writable(t) }
    ensure
      close_all(r, w)
    end

    # A full buffer a reader drains: the untimed writable wait ends.
    def wait_writable_ready(sc, rng)
      r, w = pair(rng)
      fill(w)
      drained = 0
      drainer = spawn(sc) do
        sleep(rng.rand * 0.003) if rng.rand(2).zero?
        loop do
          c = r.read_nonblock(65_536, exception: false)
          break if c == :wait_readable

          drained += c.bytesize
        end
      end
      sc.step = :wait
      timed = rng.rand(2).zero?
      res = timed ? w.wait_writable(LONG) : w.wait_writable
      check(sc, res, "wait_writable returned #{res.inspect} though the buffer was drained")
      # the drainer may have read without counting yet (it is parked in its
      # next hook): then there is room, and a write says so
      probe = drained.positive? ? 1 : w.write_nonblock("x", exception: false)
      check(sc, probe != :wait_writable, "wait_writable#{timed ? '(timeout)' : ''} on a full #{w.class} " \
                                         "(fd #{w.fileno}) returned, and nothing was drained: a write would wait")
      wait_until(sc, "the drainer") { !drainer.alive? }
    ensure
      close_all(r, w)
    end

    # Producers and consumers on one Queue (untimed and timed pops): every
    # item arrives once, in order per producer.
    def queue(sc, rng)
      q = rng.rand(3).zero? ? SizedQueue.new(1 + rng.rand(3)) : Queue.new
      producers = 1 + rng.rand(3)
      per = 1 + rng.rand(20)
      consumers = 1 + rng.rand(3)
      got = Array.new(consumers) { [] }
      cons = Array.new(consumers) do |c|
        spawn(sc) do
          loop do
            item = if RUBY_32 && rng.rand(3).zero?
                     q.pop(timeout: rng.rand * 0.003)
                   else
                     q.pop
                   end
            next if item.nil? # a timed pop that expired

            break if item == :end

            got[c] << item
          end
        end
      end
      sc.step = :produce
      prods = Array.new(producers) do |p|
        spawn(sc) do
          per.times do |i|
            q << [p, i]
            pace(rng)
          end
        end
      end
      wait_until(sc, "the producers") { prods.none?(&:alive?) }
      consumers.times { q << :end }
      sc.step = :consume
      wait_until(sc, "the consumers") { cons.none?(&:alive?) }
      all = got.flatten(1)
      check(sc, all.sort == (0...producers).flat_map { |p| (0...per).map { |i| [p, i] } }.sort,
            "consumers got #{all.size} items, not the #{producers * per} pushed once each")
      got.each do |list|
        (0...producers).each do |p|
          mine = list.select { |item| item[0] == p }.map(&:last)
          check(sc, mine == mine.sort, "one consumer got producer #{p}'s items out of order")
        end
      end
    end

    def queue_pop_timeout(sc, rng)
      return sleep_timed(sc, rng) unless RUBY_32

      q = Queue.new
      check_times_out(sc, rng, :pop, "pop(timeout:)", "of an empty queue") { |t| q.pop(timeout: t) }
    end

    # Fibers increment a counter under a Mutex with waits inside.
    def mutex(sc, rng)
      m = Mutex.new
      count = 0
      n = 2 + rng.rand(5)
      k = 1 + rng.rand(8)
      fs = Array.new(n) do
        spawn(sc) do
          k.times do
            m.synchronize do
              v = count
              sleep(rng.rand(2).zero? ? 0 : rng.rand * 0.001)
              count = v + 1
            end
            pace(rng)
          end
        end
      end
      sc.step = :workers
      wait_until(sc, "the workers") { fs.none?(&:alive?) }
      check(sc, count == n * k, "the counter is #{count}, not #{n * k}: two fibers held the lock at once")
    end

    # A bounded buffer over a Mutex and two ConditionVariables (untimed and
    # timed waits, signal and broadcast).
    def condition_variable(sc, rng)
      m = Mutex.new
      not_empty = ConditionVariable.new
      not_full = ConditionVariable.new
      buf = []
      cap = 1 + rng.rand(3)
      total = 1 + rng.rand(30)
      got = []
      consumers = 1 + rng.rand(3)
      cons = Array.new(consumers) do
        spawn(sc) do
          loop do
            item = m.synchronize do
              while buf.empty?
                rng.rand(2).zero? ? not_empty.wait(m) : not_empty.wait(m, rng.rand * 0.003)
              end
              x = buf.shift
              rng.rand(2).zero? ? not_full.signal : not_full.broadcast
              x
            end
            break if item == :end

            got << item
          end
        end
      end
      sc.step = :produce
      (total.times.to_a + [:end] * consumers).each do |item|
        m.synchronize do
          not_full.wait(m) while buf.size >= cap
          buf << item
          rng.rand(2).zero? ? not_empty.signal : not_empty.broadcast
        end
        pace(rng)
      end
      sc.step = :consume
      wait_until(sc, "the consumers") { cons.none?(&:alive?) }
      check(sc, got.sort == (0...total).to_a, "consumers got #{got.sort.inspect[0, 80]}, not 0...#{total}")
    end

    def sleep_timed(sc, rng)
      t = rng.rand * 0.01
      t0 = now
      sc.step = :sleep
      sleep(t)
      check(sc, now - t0 >= t * 0.99, "sleep(#{t}) returned after #{now - t0}")
    end

    # An untimed sleep ended by Timeout or Fiber#raise, never on its own.
    def sleep_forever_ended(sc, rng)
      if rng.rand(2).zero?
        t = 0.001 + rng.rand * 0.005
        sc.step = :sleep_in_timeout
        begin
          Timeout.timeout(t) { sleep }
          fail!(sc, "an untimed sleep returned")
        rescue Timeout::Error
          @ops += 1
        end
      else
        state = nil
        sleeper = spawn(sc) do
          sleep
          state = :returned
        rescue Stop
          state = :raised
        end
        sc.step = :raise
        sleep(rng.rand * 0.002) if rng.rand(2).zero?
        sleeper.raise(Stop)
        check(sc, state == :raised, "the sleeper ended #{state.inspect}, not by the raise")
      end
    end

    # Timeout around a read: either the read got the data (written in one
    # atomic write) or it timed out and the data is still there, whole.
    def timeout_read(sc, rng)
      r, w = pair(rng)
      data = rng.bytes(1 + rng.rand(1024))
      writer = spawn(sc) { sleep(rng.rand * 0.006); w.write(data) }
      got = nil
      sc.step = :read
      begin
        Timeout.timeout(rng.rand * 0.004) { got = rng.rand(2).zero? ? r.readpartial(4096) : r.read(data.bytesize) }
      rescue Timeout::Error
        @ops += 1
      end
      got ||= begin
        sc.step = :read_after_timeout
        wait_until(sc, "the writer") { !writer.alive? }
        r.read(data.bytesize)
      end
      check(sc, got == data, "got #{got&.bytesize.inspect} bytes around a timeout, not the #{data.bytesize} written")
    ensure
      close_all(r, w)
    end

    # Timeout around an untimed pop: the item pushed afterwards goes to the
    # next pop, not to the timed-out one.
    def timeout_pop(sc, rng)
      q = Queue.new
      sc.step = :pop
      begin
        Timeout.timeout(0.0005 + rng.rand * 0.003) { q.pop }
        fail!(sc, "a pop of an empty queue returned")
      rescue Timeout::Error
        @ops += 1
      end
      q << :item
      item = nil
      popper = spawn(sc) { item = q.pop }
      wait_until(sc, "the second pop") { !popper.alive? }
      check(sc, item == :item, "the pop after a timed-out pop got #{item.inspect}")
    end

    # A fiber parked in some wait is raised into (or killed); what it waited
    # on keeps working for the next fiber.
    def raise_parked(sc, rng)
      kind = %i[read write pop lock cv sleep timed_read].sample(random: rng)
      r, w = pair(rng)
      q = Queue.new
      m = Mutex.new
      cv = ConditionVariable.new
      fill(w) if kind == :write
      holder = nil
      if kind == :lock
        holder = spawn(sc) { m.synchronize { sleep } rescue Stop }
      end
      state = nil
      ensured = false
      target = spawn(sc) do
        case kind
        when :read then r.read(1)
        when :write then w.write("x" * 70_000)
        when :pop then q.pop
        when :lock then m.lock
        when :cv # not synchronize: Ruby 3.1's Mutex#sleep leaves the mutex unlocked when its sleep raises
          m.lock
          begin
            cv.wait(m)
          ensure
            m.unlock if m.owned?
          end
        when :sleep then sleep
        when :timed_read then r.wait_readable(LONG)
        end
        state = :returned
      rescue Stop
        state = :raised
      ensure
        ensured = true
      end
      sc.step = :"raise_#{kind}"
      sleep(rng.rand * 0.002) if rng.rand(2).zero?
      kill = RUBY_33 && rng.rand(3).zero?
      kill ? target.kill : target.raise(Stop)
      # A read or write that is a completion operation (io_uring) leaves
      # only once the kernel let go of its buffer: the cancellation takes
      # the loop one more iteration, and the raise returns when the fiber
      # parks for it (Fiber#raise returns at the fiber's next yield).
      wait_until(sc, "the #{kind} waiter to end after #{kill ? 'kill' : 'raise'}") { !target.alive? }
      check(sc, ensured, "the #{kind} waiter's ensure did not run")
      check(sc, state == (kill ? nil : :raised), "the #{kind} waiter ended #{state.inspect}")
      sc.step = :"reuse_#{kind}"
      case kind
      when :read, :timed_read
        w.write("z")
        c = r.read(1)
        check(sc, c == "z", "the byte written after the raise read as #{c.inspect}")
      when :write
        r.read_nonblock(1 << 20) while r.wait_readable(0)
        w.write("y")
        check(sc, r.read(1) == "y", "the pipe did not carry a byte after the raised write")
      when :pop
        q << :x
        check(sc, q.pop == :x, "the queue lost the item pushed after the raise")
      when :lock
        holder.raise(Stop)
        check(sc, m.try_lock, "the mutex is still held after both holders left")
        m.unlock if m.owned?
      when :cv
        check(sc, !m.locked?, "the mutex is still held after the cv waiter left")
      end
    ensure
      close_all(r, w)
    end

    # Another thread pushes into a Queue the fibers pop (unblock from a
    # thread); every item arrives once, in order.
    def thread_queue(sc, rng)
      q = Queue.new
      n = 1 + rng.rand(30)
      delays = Array.new(n) { rng.rand(3).zero? ? rng.rand * 0.002 : 0 }
      sc.threads << Thread.new do
        delays.each_with_index do |d, i|
          sleep(d) if d.positive?
          q << i
        end
      end
      got = []
      sc.step = :pop
      n.times { got << q.pop }
      check(sc, got == (0...n).to_a, "popped #{got.inspect[0, 80]} from the thread, not 0...#{n} in order")
    end

    # A Mutex a plain thread holds: the fiber's lock ends when it unlocks.
    def thread_mutex(sc, rng)
      m = Mutex.new
      locked = Queue.new
      hold = rng.rand * 0.003
      sc.threads << Thread.new do
        m.synchronize do
          locked << true
          sleep(hold)
        end
      end
      locked.pop
      sc.step = :lock
      m.synchronize { check(sc, m.owned?, "the fiber's lock returned without the mutex") }
    end

    # A ConditionVariable another thread signals (unblock from a thread),
    # with a predicate: no lost signal, no wait that returns without it.
    def thread_condition_variable(sc, rng)
      m = Mutex.new
      cv = ConditionVariable.new
      rounds = 1 + rng.rand(10)
      seen = 0
      value = 0
      delays = Array.new(rounds) { rng.rand(2).zero? ? rng.rand * 0.002 : 0 }
      sc.threads << Thread.new do
        delays.each do |d|
          sleep(d) if d.positive?
          m.synchronize do
            value += 1
            rng.rand(2).zero? ? cv.signal : cv.broadcast
          end
        end
      end
      sc.step = :wait
      m.synchronize do
        while seen < rounds
          cv.wait(m) while value == seen
          check(sc, m.owned?, "ConditionVariable#wait returned without the mutex")
          seen = value
        end
      end
      check(sc, seen == rounds, "saw #{seen} of #{rounds} signals")
    end

    # More fibers park in one run of the loop than it holds reserved tokens
    # and deferred waits for (256): the rest take the slow path, and all of
    # them must wake. Readers of one pipe and poppers of one Queue.
    def crowd(sc, rng)
      n = 150 + rng.rand(250)
      r, w = IO.pipe
      q = Queue.new
      got = []
      fs = Array.new(n) do |i|
        spawn(sc) { got << (i.even? ? r.read(1) : q.pop) }
      end
      sc.step = :wake
      readers = (n + 1) / 2
      data = Array.new(readers) { |i| (97 + (i % 26)).chr }.join
      w.write(data)
      (n - readers).times { |i| q << i }
      wait_until(sc, "the crowd") { fs.none?(&:alive?) }
      check(sc, got.size == n, "#{got.size} of #{n} crowd fibers woke")
      check(sc, got.grep(String).sort.join == data.chars.sort.join, "the crowd's readers got other bytes than written")
      check(sc, got.grep(Integer).sort == (0...(n - readers)).to_a, "the crowd's poppers got other items than pushed")
    ensure
      close_all(r, w)
    end

    # A collection while fibers wait: descriptor identity (fd_table.c) must
    # survive it, and nothing parked may be lost.
    def gc(sc, rng)
      sc.step = :gc
      GC.start(full_mark: rng.rand(2).zero?, immediate_sweep: rng.rand(2).zero?)
      @ops += 1
    end

    # IO#close on the loop's thread while fibers wait on the IO: each waiter
    # raises IOError.
    def close_loop(sc, rng)
      close_while_parked(sc, rng) { |io| io.close }
    end

    # The same with the close from another thread.
    def close_thread(sc, rng)
      close_while_parked(sc, rng) do |io|
        t = Thread.new { io.close }
        sc.threads << t
        t.join
      end
    end

    def close_while_parked(sc, rng)
      r, w = pair(rng)
      waiters = 1 + rng.rand(3)
      errors = 0
      others = []
      target = rng.rand(2).zero? ? :read : :write
      fill(w) if target == :write
      fs = Array.new(waiters) do
        spawn(sc) do
          if target == :read
            case rng.rand(3)
            when 0 then r.read(1)
            when 1 then r.wait_readable
            else r.wait_readable(LONG)
            end
          else
            rng.rand(2).zero? ? w.write("x" * 70_000) : w.wait_writable
          end
          others << :returned
        rescue IOError
          errors += 1
        rescue StandardError => e
          others << e.class
        end
      end
      sc.step = :"close_#{target}"
      sleep(rng.rand * 0.002) if rng.rand(2).zero?
      yield(target == :read ? r : w)
      wait_until(sc, "the waiters to leave the closed IO") { fs.none?(&:alive?) }
      check(sc, errors == waiters, "#{errors} of #{waiters} waiters on the closed IO raised IOError (others: #{others.inspect})")
    ensure
      close_all(r, w)
    end

    # The other end closed (on this thread or another): a reader gets what
    # was written, then end of file.
    def eof_on_close(sc, rng)
      r, w = pair(rng)
      data = rng.bytes(rng.rand(2000))
      got = nil
      reader = spawn(sc) { got = r.read }
      sc.step = :write_close
      w.write(data) unless data.empty?
      if rng.rand(2).zero?
        w.close
      else
        t = Thread.new { w.close }
        sc.threads << t
        t.join
      end
      wait_until(sc, "the reader to see end of file") { !reader.alive? }
      check(sc, got&.b == data, "read to EOF gave #{got&.bytesize.inspect} bytes, not #{data.bytesize}")
    ensure
      close_all(r, w)
    end

    # A fiber waits on a descriptor, the IO is closed and a new pipe takes
    # the same number, often before the loop polled again (the old wait is
    # still deferred). The old waiter gets IOError; the new reader gets its
    # own bytes only.
    def descriptor_reuse(sc, rng)
      r1, w1 = IO.pipe
      old_fd = r1.fileno
      old = nil
      waiter = spawn(sc) do
        rng.rand(2).zero? ? r1.read(1) : r1.wait_readable
        old = :returned
      rescue IOError
        old = :ioerror
      end
      sc.step = :close_old
      sleep(rng.rand * 0.002) if rng.rand(2).zero?
      if rng.rand(2).zero?
        r1.close
      else
        t = Thread.new { r1.close }
        sc.threads << t
        t.join
      end
      w1.close
      r2, w2 = IO.pipe
      data = rng.bytes(1 + rng.rand(100))
      got = nil
      reader = spawn(sc) { got = r2.read(data.bytesize) }
      sc.step = :new_pipe
      if rng.rand(2).zero?
        w2.write(data)
      else
        t = Thread.new { sleep(rng.rand * 0.002); w2.write(data) }
        sc.threads << t
        t.join
      end
      wait_until(sc, "the old waiter and the new reader") { !waiter.alive? && !reader.alive? }
      check(sc, old == :ioerror, "the waiter on the closed descriptor #{old_fd} ended #{old.inspect}")
      check(sc, got == data, "the reader of the new pipe (fd #{r2.fileno}, old #{old_fd}) got #{got.inspect[0, 40]}")
    ensure
      close_all(*[r1, w1, r2, w2].compact)
    end
  end

  def self.open_descriptors
    GC.start
    Dir.children("/proc/self/fd").size
  end

  def self.main(seed, count, backend)
    $stdout.sync = true
    # the Go runtime's own descriptors and threads start on first use: before the count
    Farce.run(backend: backend) { sleep(0.001) }
    before = open_descriptors
    run = Run.new(seed, count)
    deadline = Float(ENV.fetch("FARCE_STRESS_DEADLINE", "60"))
    watchdog = Thread.new do
      sleep deadline
      puts "FAIL seed #{seed}: still running after #{deadline}s (a lost wakeup?):"
      run.running.first(20).each { |sc| puts "  #{sc}" }
      puts "  failures so far: #{run.failures.first(5).inspect}"
      $stdout.flush
      exit!(3)
    end
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Farce.run(backend: backend) { run.call }
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    watchdog.kill
    after = open_descriptors
    run.failures << "#{after - before} descriptors leaked (#{before} before, #{after} after)" if after != before
    if run.failures.empty?
      puts format("OK seed %d backend %s: %d scenarios, %d checks in %.2fs", seed, backend, count, run.ops, elapsed)
      exit 0
    end
    run.failures.first(30).each { |f| puts "FAIL seed #{seed}: #{f}" }
    puts "FAIL seed #{seed}: #{run.failures.size} failures"
    exit 1
  end
end

WaitStress.main(Integer(ARGV[0]), Integer(ARGV[1]), (ARGV[2] || "auto").to_sym) if $PROGRAM_NAME == __FILE__
