# frozen_string_literal: true

# The Fiber::Scheduler contract as shared examples, independent of any one
# scheduler:
#
#   it_behaves_like "a Fiber::Scheduler", -> { MyScheduler.new },
#                   pending: { some_key: "why it differs" },
#                   skip: { other_key: "why it cannot even run" }
#
# The factory is called once per example, inside a fresh thread. Every example
# carries `contract: <key>` metadata; `pending:` runs the example and expects
# it to fail (so a scheduler that starts complying turns the run red and the
# entry gets removed), `skip:` does not run it (for behaviour that would only
# hang or make noise). Unknown keys raise, so a typo cannot silently disable
# nothing.
module FiberSchedulerContract
  # Seconds an example may take before it counts as hung.
  HANG_LIMIT = Float(ENV.fetch("CONTRACT_HANG_LIMIT", "10"))

  class Hang < StandardError; end
  class Boom < StandardError; end

  module Helpers
    # Runs the block in a new thread with a scheduler from `factory` installed,
    # then uninstalls it with Fiber.set_scheduler(nil), which runs the fibers
    # still alive. Returns the block's value; re-raises what the thread raised
    # (including what closing raised). A fresh thread per example means a
    # failing example cannot leave a scheduler installed on the runner's
    # thread, and the join limit turns a hang into a failure.
    def with_scheduler(factory, limit: HANG_LIMIT)
      raised = nil
      thread = Thread.new do
        Thread.current.report_on_exception = false
        scheduler = factory.call
        Fiber.set_scheduler(scheduler)
        result = yield scheduler
        Fiber.set_scheduler(nil)
        result
      rescue Exception => e # rubocop:disable Lint/RescueException -- recorded for the hang report, then re-raised
        raised = e
        raise
      end
      return thread.value if thread.join(limit)

      thread.kill
      dead = thread.join(2)
      message = +"hung for #{limit}s"
      message << " (and Thread#kill did not end the thread)" unless dead
      message << "; before that it raised #{raised.class}: #{raised.message}" if raised
      raise Hang, message
    end

    # For examples that must let the thread end with the scheduler still
    # installed (so Ruby's own close at thread exit runs): joins within the
    # hang limit, re-raising the thread's exception; kills it on a hang.
    def join_or_kill(thread, limit: HANG_LIMIT)
      return thread if thread.join(limit)

      thread.kill
      thread.join(2)
      raise Hang, "hung for #{limit}s"
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # Records how often the named hooks run, by prepending wrappers onto the
    # scheduler's singleton class. Proves a Ruby operation was routed through
    # the hook rather than done blocking behind the scheduler's back.
    def spy_on(scheduler, *hooks)
      calls = Hash.new(0)
      wrappers = Module.new do
        hooks.each do |hook|
          define_method(hook) do |*arguments, &block|
            calls[hook] += 1
            super(*arguments, &block)
          end
        end
      end
      scheduler.singleton_class.prepend(wrappers)
      calls
    end

    # A pipe that is full: the next write must wait for a reader.
    def full_pipe
      r, w = IO.pipe
      chunk = "x" * 65_536
      loop { w.write_nonblock(chunk) }
    rescue IO::WaitWritable
      begin
        w.write_nonblock("x") while true # fill the last partial chunk
      rescue IO::WaitWritable
        [r, w]
      end
    end
  end
end

RSpec.shared_examples "a Fiber::Scheduler" do |factory, differences = {}|
  differences = { pending: {}, skip: {} }.merge(differences)

  before do |example|
    key = example.metadata[:contract]
    if (reason = differences[:skip][key])
      skip(reason)
    elsif (reason = differences[:pending][key])
      pending(reason)
    end
  end

  let(:factory) { factory }
  let(:boom) { FiberSchedulerContract::Boom }

  describe "Fiber.schedule" do
    it "runs the block at once and returns the fiber when it first blocks", contract: :schedule_starts_at_once do
      order = []
      fiber_alive = nil
      with_scheduler(factory) do
        fiber = Fiber.schedule do
          order << :started
          sleep 0.01
          order << :resumed
        end
        order << :returned
        fiber_alive = [fiber.class, fiber.alive?]
      end
      expect(order).to eq(%i[started returned resumed])
      expect(fiber_alive).to eq([Fiber, true])
    end

    it "runs the block in a non-blocking fiber", contract: :schedule_non_blocking do
      got = nil
      with_scheduler(factory) do
        root = Fiber.current
        Fiber.schedule { got = [Fiber.current.blocking?, Fiber.current.equal?(root)] }
      end
      expect(got).to eq([false, false])
    end

    it "passes its arguments to the block", contract: :schedule_arguments do
      got = nil
      with_scheduler(factory) do
        Fiber.schedule(1, :two) { |*arguments| got = arguments }
      end
      expect(got).to eq([1, :two])
    end

    it "returns the finished fiber when the block never blocks", contract: :schedule_returns_finished_fiber do
      result = nil
      with_scheduler(factory) do
        fiber = Fiber.schedule { :done }
        result = [fiber.class, fiber.alive?]
      end
      expect(result).to eq([Fiber, false])
    end

    it "runs fibers scheduled from inside fibers before closing", contract: :nested_schedule do
      done = []
      with_scheduler(factory) do
        Fiber.schedule do
          Fiber.schedule { sleep 0.02; done << :inner }
          sleep 0.01
          done << :outer
        end
      end
      expect(done).to eq(%i[outer inner])
    end
  end

  describe "kernel_sleep" do
    it "sleeps the fiber for the duration without blocking the thread", contract: :sleep_duration do
      events = []
      elapsed = nil
      with_scheduler(factory) do |scheduler|
        calls = spy_on(scheduler, :kernel_sleep)
        start = monotonic
        Fiber.schedule { sleep 0.05; events << :slept }
        events << :after_schedule
        Fiber.schedule { events << :other_fiber }
        Fiber.set_scheduler(nil)
        elapsed = monotonic - start
        events << [:kernel_sleep_calls, calls[:kernel_sleep]]
      end
      expect(events).to eq([:after_schedule, :other_fiber, :slept, [:kernel_sleep_calls, 1]])
      expect(elapsed).to be >= 0.045
      expect(elapsed).to be < 2
    end

    it "overlaps concurrent sleeps", contract: :sleep_overlap do
      elapsed = nil
      with_scheduler(factory) do
        start = monotonic
        10.times { Fiber.schedule { sleep 0.2 } }
        Fiber.set_scheduler(nil)
        elapsed = monotonic - start
      end
      expect(elapsed).to be >= 0.19
      expect(elapsed).to be < 1.0 # serial would be 2 s
    end

    it "wakes fibers in the order of their deadlines", contract: :sleep_order do
      order = []
      with_scheduler(factory) do
        [0.06, 0.02, 0.04].each { |d| Fiber.schedule { sleep d; order << d } }
      end
      expect(order).to eq([0.02, 0.04, 0.06])
    end

    it "sleeps without a duration until Fiber#raise wakes it", contract: :sleep_forever do
      rescued = nil
      with_scheduler(factory) do
        sleeper = Fiber.schedule do
          sleep
          rescued = :not_woken_by_exception
        rescue boom => e
          rescued = e.message
        end
        Fiber.schedule { sleep 0.02; sleeper.raise(boom, "wake up") }
      end
      expect(rescued).to eq("wake up")
    end

    it "sleeps without a duration until Timeout interrupts it", contract: :sleep_forever_timeout do
      outcome = nil
      with_scheduler(factory) do
        Fiber.schedule do
          start = monotonic
          Timeout.timeout(0.05) { sleep }
          outcome = :returned
        rescue Timeout::Error
          outcome = monotonic - start
        end
      end
      expect(outcome).to be_a(Float).and be_between(0.04, 2)
    end

    it "yields to other ready fibers on sleep 0", contract: :sleep_zero_yields do
      order = []
      with_scheduler(factory) do
        Fiber.schedule { 3.times { |i| order << "a#{i}"; sleep 0 } }
        Fiber.schedule { 3.times { |i| order << "b#{i}"; sleep 0 } }
      end
      expect(order.sort).to eq(%w[a0 a1 a2 b0 b1 b2])
      # Each fiber must have given way at least once before finishing.
      expect(order.index("b0")).to be < order.index("a2")
      expect(order.index("a1")).to be < order.index("b2")
    end
  end

  describe "io_wait" do
    it "waits for a pipe to become readable while other fibers run", contract: :io_wait_pipe_readable do
      events = []
      with_scheduler(factory) do |scheduler|
        calls = spy_on(scheduler, :io_wait)
        r, w = IO.pipe
        Fiber.schedule do
          ready = r.wait_readable(5)
          events << [:readable, ready ? true : ready, r.read_nonblock(10)]
        end
        events << :waiting
        Fiber.schedule { sleep 0.02; events << :writing; w.write("hi") }
        Fiber.set_scheduler(nil)
        events << [:io_wait_called, calls[:io_wait].positive?]
        [r, w].each(&:close)
      end
      expect(events).to eq([:waiting, :writing, [:readable, true, "hi"], [:io_wait_called, true]])
    end

    it "returns falsy when a wait for readable times out", contract: :io_wait_timeout do
      result = nil
      ticks = 0
      with_scheduler(factory) do
        r, w = IO.pipe
        Fiber.schedule do
          start = monotonic
          ready = r.wait_readable(0.1)
          result = [ready, monotonic - start]
        end
        Fiber.schedule { 3.times { sleep 0.01; ticks += 1 } }
        Fiber.set_scheduler(nil)
        [r, w].each(&:close)
      end
      expect(result[0]).to be_falsy
      expect(result[1]).to be_between(0.09, 2)
      expect(ticks).to eq(3)
    end

    it "returns falsy from the hook itself on timeout and an event mask when ready", contract: :io_wait_hook_direct do
      results = nil
      with_scheduler(factory) do |scheduler|
        r, w = IO.pipe
        Fiber.schedule do
          timed_out = scheduler.io_wait(r, IO::READABLE, 0.02)
          w.write("x")
          ready = scheduler.io_wait(r, IO::READABLE, 1)
          writable = scheduler.io_wait(w, IO::WRITABLE, 1)
          results = [timed_out, ready, writable]
        end
        Fiber.set_scheduler(nil)
        [r, w].each(&:close)
      end
      expect(results[0]).to be_falsy
      expect(results[1]).to be_truthy
      expect(results[1] & IO::READABLE).to eq(IO::READABLE) if results[1].is_a?(Integer)
      expect(results[2]).to be_truthy
      expect(results[2] & IO::WRITABLE).to eq(IO::WRITABLE) if results[2].is_a?(Integer)
    end

    it "reports an empty pipe writable at once and a full one only after it drains", contract: :io_wait_writable do
      result = {}
      with_scheduler(factory) do
        empty_r, empty_w = IO.pipe
        r, w = full_pipe
        Fiber.schedule do
          result[:empty] = empty_w.wait_writable(1) ? true : false
          result[:full_timeout] = w.wait_writable(0.05)
          result[:full_drained] = w.wait_writable(5) ? true : false
        end
        Fiber.schedule do
          sleep 0.1
          r.read_nonblock(1 << 20) # a pipe wakes writers once there is room for a page
        end
        Fiber.set_scheduler(nil)
        [empty_r, empty_w, r, w].each(&:close)
      end
      expect(result[:empty]).to be(true)
      expect(result[:full_timeout]).to be_falsy
      expect(result[:full_drained]).to be(true)
    end

    it "waits on a UNIX socket pair", contract: :io_wait_unix_socket do
      got = nil
      with_scheduler(factory) do
        a, b = UNIXSocket.pair
        Fiber.schedule { got = [a.wait_readable(5) ? true : false, a.recv(10)] }
        Fiber.schedule { sleep 0.02; b.send("ping", 0) }
        Fiber.set_scheduler(nil)
        [a, b].each(&:close)
      end
      expect(got).to eq([true, "ping"])
    end

    it "accepts, connects and echoes over TCP between fibers", contract: :tcp_echo do
      log = []
      with_scheduler(factory) do
        server = TCPServer.new("127.0.0.1", 0)
        port = server.addr[1]
        Fiber.schedule do
          client = server.accept
          line = client.gets
          client.write("echo #{line}")
          client.close
          log << :served
        end
        Fiber.schedule do
          socket = TCPSocket.new("127.0.0.1", port)
          socket.write("hello\n")
          log << socket.read
          socket.close
        end
        Fiber.set_scheduler(nil)
        server.close
      end
      expect(log.sort_by(&:to_s)).to eq(["echo hello\n", :served])
    end
  end

  describe "io_read and io_write" do
    it "routes IO#read and IO#write on a pipe through the hooks", contract: :io_rw_hooks do
      calls = nil
      data = nil
      with_scheduler(factory) do |scheduler|
        hooks = %i[io_read io_write].select { |hook| scheduler.respond_to?(hook) }
        calls = [hooks, spy_on(scheduler, *hooks)]
        r, w = IO.pipe
        Fiber.schedule { data = r.read(5) }
        Fiber.schedule { w.write("hello") }
        Fiber.set_scheduler(nil)
        [r, w].each(&:close)
      end
      hooks, counts = calls
      expect(data).to eq("hello")
      # Both hooks are optional in the Fiber::Scheduler interface; when
      # defined, a blocking read/write of a non-blocking fiber must use them.
      hooks.each { |hook| expect(counts[hook]).to be_positive, "#{hook} was defined but never called" }
    end

    it "returns a partial read from readpartial and waits for the full length in read(n)", contract: :io_partial_read do
      got = {}
      with_scheduler(factory) do
        r, w = IO.pipe
        Fiber.schedule do
          got[:partial] = r.readpartial(100)
          got[:full] = r.read(10)
        end
        Fiber.schedule do
          w.write("hello")
          sleep 0.02
          w.write("wor")
          sleep 0.02
          w.write("ld and more")
        end
        Fiber.set_scheduler(nil)
        got[:rest] = r.read_nonblock(100)
        [r, w].each(&:close)
      end
      expect(got).to eq(partial: "hello", full: "world and ", rest: "more")
    end

    it "reports EOF once the writer closes", contract: :io_eof do
      got = {}
      with_scheduler(factory) do
        r, w = IO.pipe
        Fiber.schedule do
          got[:first] = r.read(3)
          got[:short] = r.read(10) # fewer bytes than asked, then EOF
          got[:read_n] = r.read(10)
          got[:read_all] = r.read
          got[:gets] = r.gets
          begin
            r.readpartial(10)
            got[:readpartial] = :no_error
          rescue EOFError
            got[:readpartial] = EOFError
          end
        end
        Fiber.schedule do
          w.write("abc")
          sleep 0.02
          w.write("de")
          sleep 0.02
          w.close
        end
        Fiber.set_scheduler(nil)
        r.close
      end
      expect(got).to eq(first: "abc", short: "de", read_n: nil, read_all: "", gets: nil, readpartial: EOFError)
    end

    it "blocks a large write until a reader drains the pipe, letting other fibers run", contract: :io_large_write do
      size = 4 * 1024 * 1024
      state = {}
      received = nil
      with_scheduler(factory) do
        r, w = IO.pipe
        r.binmode # read-to-EOF would otherwise tag the bytes UTF-8 and never equal the binary payload
        written = false
        payload = Random.new(42).bytes(size)
        Fiber.schedule do
          state[:returned] = w.write(payload)
          written = true
          w.close
        end
        state[:written_when_schedule_returned] = written
        Fiber.schedule { received = r.read }
        Fiber.set_scheduler(nil)
        state[:intact] = received == payload
        r.close
      end
      expect(state).to eq(written_when_schedule_returned: false, returned: size, intact: true)
    end

    it "writes through a socket whose peer reads slowly", contract: :io_socket_backpressure do
      got = nil
      with_scheduler(factory) do
        a, b = UNIXSocket.pair
        chunks = Array.new(64) { |i| (i % 256).chr * 16_384 }
        Fiber.schedule do
          chunks.each { |chunk| a.write(chunk) }
          a.close
        end
        Fiber.schedule do
          buffer = +""
          while (piece = b.read(65_536))
            buffer << piece
            sleep 0.001
          end
          got = buffer == chunks.join
        end
        Fiber.set_scheduler(nil)
        b.close
      end
      expect(got).to be(true)
    end
  end

  describe "block and unblock" do
    it "passes values through a Queue between fibers", contract: :queue do
      got = []
      with_scheduler(factory) do
        q = Queue.new
        Fiber.schedule { 3.times { got << q.pop } }
        got << :consumer_waiting
        Fiber.schedule { 3.times { |i| sleep 0.01; q << i } }
      end
      expect(got).to eq([:consumer_waiting, 0, 1, 2])
    end

    it "makes a SizedQueue producer wait for the consumer", contract: :sized_queue do
      log = []
      with_scheduler(factory) do
        q = SizedQueue.new(1)
        Fiber.schedule { 3.times { |i| q << i; log << "pushed #{i}" } }
        Fiber.schedule { 3.times { sleep 0.01; log << "popped #{q.pop}" } }
      end
      # With room for one item, push n+1 cannot complete before pop n.
      expect(log.index("pushed 1")).to be > log.index("popped 0")
      expect(log.index("pushed 2")).to be > log.index("popped 1")
      expect(log.size).to eq(6)
    end

    it "lets a Queue#pop time out", contract: :queue_pop_timeout do
      skip "Queue#pop(timeout:) needs Ruby 3.2" if RUBY_VERSION < "3.2"
      got = nil
      with_scheduler(factory) do
        q = Queue.new
        Fiber.schedule do
          start = monotonic
          value = q.pop(timeout: 0.05)
          got = [value, monotonic - start]
        end
      end
      expect(got[0]).to be_nil
      expect(got[1]).to be_between(0.04, 2)
    end

    it "keeps a Mutex exclusive between fibers that sleep while holding it", contract: :mutex do
      log = []
      with_scheduler(factory) do
        m = Mutex.new
        2.times do |i|
          Fiber.schedule do
            m.synchronize do
              log << "enter #{i}"
              sleep 0.02
              log << "exit #{i}"
            end
          end
        end
      end
      expect(log).to eq(["enter 0", "exit 0", "enter 1", "exit 1"])
    end

    it "waits for a Mutex held by another thread without blocking other fibers", contract: :mutex_cross_thread do
      log = []
      with_scheduler(factory) do
        m = Mutex.new
        locked = Queue.new
        ticked = Queue.new
        # The holder lets go once the ticks are done (or after 2 s, when a
        # scheduler that blocks the thread on the lock never lets them run):
        # a fixed hold of 0.1 s was outlasted by three 10 ms ticks on a
        # loaded machine, and the lock came between them.
        holder = Thread.new do
          m.synchronize do
            locked << true
            deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 2
            sleep 0.005 while ticked.empty? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
          end
        end
        locked.pop # the thread's root fiber is blocking: a plain wait until the holder has the lock
        Fiber.schedule { m.synchronize { log << :got_lock } }
        Fiber.schedule do
          3.times { sleep 0.01; log << :tick }
          ticked << true
        end
        Fiber.set_scheduler(nil)
        holder.join
      end
      expect(log).to eq(%i[tick tick tick got_lock])
    end

    it "signals a ConditionVariable between fibers", contract: :condition_variable do
      log = []
      with_scheduler(factory) do
        m = Mutex.new
        cv = ConditionVariable.new
        ready = false
        Fiber.schedule do
          m.synchronize do
            cv.wait(m) until ready
            log << :woken
          end
        end
        Fiber.schedule do
          sleep 0.02
          m.synchronize { ready = true; log << :signal; cv.signal }
        end
      end
      expect(log).to eq(%i[signal woken])
    end

    it "times out a ConditionVariable wait and reacquires the mutex", contract: :condition_variable_timeout do
      got = nil
      with_scheduler(factory) do
        m = Mutex.new
        cv = ConditionVariable.new
        Fiber.schedule do
          m.synchronize do
            start = monotonic
            cv.wait(m, 0.05)
            got = [monotonic - start, m.owned?]
          end
        end
      end
      expect(got[0]).to be_between(0.04, 2)
      expect(got[1]).to be(true)
    end

    it "wakes a fiber waiting on a Queue when another thread pushes", contract: :queue_cross_thread do
      log = []
      with_scheduler(factory) do |scheduler|
        calls = spy_on(scheduler, :unblock)
        q = Queue.new
        pusher = Thread.new { sleep 0.05; q << :from_thread }
        Fiber.schedule { log << q.pop }
        Fiber.schedule { 3.times { sleep 0.005; log << :tick } }
        Fiber.set_scheduler(nil)
        pusher.join
        log << [:unblock_called, calls[:unblock].positive?]
      end
      expect(log).to eq([:tick, :tick, :tick, :from_thread, [:unblock_called, true]])
    end

    it "joins another thread from a fiber without blocking other fibers", contract: :thread_join do
      log = []
      with_scheduler(factory) do
        Fiber.schedule { log << Thread.new { sleep 0.05; :thread_value }.value }
        Fiber.schedule { 3.times { sleep 0.005; log << :tick } }
      end
      expect(log).to eq(%i[tick tick tick thread_value])
    end
  end

  describe "timeout_after" do
    it "raises Timeout::Error in a fiber whose block overruns, via the hook", contract: :timeout do
      got = nil
      with_scheduler(factory) do |scheduler|
        calls = spy_on(scheduler, :timeout_after)
        Fiber.schedule do
          start = monotonic
          Timeout.timeout(0.05) { sleep 5 }
          got = :no_timeout
        rescue Timeout::Error => e
          got = [e.class, monotonic - start]
        end
        Fiber.set_scheduler(nil)
        got << calls[:timeout_after] if got.is_a?(Array)
      end
      expect(got[0]).to be <= Timeout::Error
      expect(got[1]).to be_between(0.04, 2)
      expect(got[2]).to eq(1)
    end

    it "returns the block's value when it finishes in time and cancels the timer", contract: :timeout_not_reached do
      got = nil
      with_scheduler(factory) do
        Fiber.schedule do
          value = Timeout.timeout(0.05) { sleep 0.01; :done }
          sleep 0.1 # a timer left armed would raise here
          got = value
        rescue Timeout::Error
          got = :raised_late
        end
      end
      expect(got).to eq(:done)
    end

    it "raises the given exception class and message, interrupting an IO wait", contract: :timeout_custom_exception do
      got = nil
      with_scheduler(factory) do
        r, w = IO.pipe
        Fiber.schedule do
          Timeout.timeout(0.05, boom, "too slow") { r.read(1) }
          got = :no_timeout
        rescue boom => e
          got = e.message
        end
        Fiber.set_scheduler(nil)
        [r, w].each(&:close)
      end
      expect(got).to eq("too slow")
    end

    it "times out one fiber while others keep running", contract: :timeout_isolated do
      log = []
      with_scheduler(factory) do
        Fiber.schedule do
          Timeout.timeout(0.03) { sleep 1 }
        rescue Timeout::Error
          log << :timed_out
        end
        Fiber.schedule { sleep 0.06; log << :other_finished }
      end
      expect(log).to eq(%i[timed_out other_finished])
    end
  end

  describe "process_wait" do
    it "waits for a child in one fiber while others run", contract: :process_wait do
      log = []
      status = nil
      with_scheduler(factory) do |scheduler|
        calls = spy_on(scheduler, :process_wait)
        pid = Process.spawn("sh", "-c", "sleep 0.2; exit 7")
        Fiber.schedule do
          waited, status = Process.wait2(pid)
          log << [:waited, waited == pid]
        end
        Fiber.schedule { 3.times { sleep 0.01; log << :tick } }
        Fiber.set_scheduler(nil)
        log << [:process_wait_called, calls[:process_wait].positive?]
      end
      expect(log).to eq([:tick, :tick, :tick, [:waited, true], [:process_wait_called, true]])
      expect(status.exitstatus).to eq(7)
    end

    it "sets $? from Process.wait in the fiber", contract: :process_wait_last_status do
      got = nil
      with_scheduler(factory) do
        pid = Process.spawn("sh", "-c", "exit 3")
        Fiber.schedule do
          Process.wait(pid)
          got = [$?.pid == pid, $?.exitstatus]
        end
      end
      expect(got).to eq([true, 3])
    end
  end

  describe "address_resolve" do
    it "resolves localhost through the hook", contract: :address_resolve do
      got = nil
      with_scheduler(factory) do |scheduler|
        calls = spy_on(scheduler, :address_resolve)
        Fiber.schedule do
          addresses = Addrinfo.getaddrinfo("localhost", 80, nil, :STREAM).map(&:ip_address)
          got = [addresses, calls[:address_resolve]]
        end
      end
      expect(got[0]).to include("127.0.0.1").or include("::1")
      expect(got[1]).to be_positive
    end

    it "returns an array of address strings from the hook itself", contract: :address_resolve_direct do
      got = nil
      with_scheduler(factory) do |scheduler|
        Fiber.schedule { got = scheduler.address_resolve("localhost") }
      end
      expect(got).to be_an(Array)
      expect(got).to all(be_a(String))
      expect(got).to include("127.0.0.1").or include("::1")
    end

    it "connects a TCPSocket by host name", contract: :tcp_by_name do
      got = nil
      with_scheduler(factory) do
        server = TCPServer.new("127.0.0.1", 0)
        Fiber.schedule { c = server.accept; c.write("ok"); c.close }
        Fiber.schedule do
          socket = TCPSocket.new("localhost", server.addr[1])
          got = socket.read
          socket.close
        end
        Fiber.set_scheduler(nil)
        server.close
      end
      expect(got).to eq("ok")
    end
  end

  describe "exceptions" do
    it "raises out of Fiber.schedule when the fiber fails before blocking", contract: :exception_before_block do
      got = nil
      with_scheduler(factory) do
        Fiber.schedule { raise boom, "at once" }
        got = :not_raised
      rescue boom => e
        got = e.message
      end
      expect(got).to eq("at once")
    end

    it "raises out of Fiber.set_scheduler(nil) when a fiber fails after blocking", contract: :exception_on_close do
      expect do
        with_scheduler(factory) do
          Fiber.schedule { sleep 0.01; raise boom, "later" }
        end
      end.to raise_error(boom, "later")
    end

    it "raises out of the implicit close at thread exit", contract: :exception_on_thread_exit do
      thread = Thread.new do
        Thread.current.report_on_exception = false
        Fiber.set_scheduler(factory.call)
        Fiber.schedule { sleep 0.01; raise boom, "at exit" }
        :body_finished
      end
      # Thread#join re-raises the thread's exception, which is what we expect.
      expect { join_or_kill(thread) }.to raise_error(boom, "at exit")
    end
  end

  describe "closing" do
    it "runs every remaining fiber to completion on Fiber.set_scheduler(nil)", contract: :close_runs_fibers do
      done = []
      after_close = nil
      with_scheduler(factory) do
        r, w = IO.pipe
        Fiber.schedule { sleep 0.03; done << :sleeper }
        Fiber.schedule { done << [:reader, r.read(4)] }
        Fiber.schedule { sleep 0.01; w.write("data") }
        q = Queue.new
        Fiber.schedule { done << [:queue, q.pop] }
        Fiber.schedule { sleep 0.02; q << :item }
        Fiber.set_scheduler(nil)
        after_close = [Fiber.scheduler, done.size]
        [r, w].each(&:close)
      end
      expect(done).to contain_exactly(:sleeper, [:reader, "data"], %i[queue item])
      expect(after_close).to eq([nil, 3])
    end

    it "runs remaining fibers when the thread exits with the scheduler installed", contract: :close_at_thread_exit do
      done = []
      thread = Thread.new do
        Fiber.set_scheduler(factory.call)
        3.times { |i| Fiber.schedule { sleep 0.01 * (i + 1); done << i } }
      end
      join_or_kill(thread)
      expect(done).to eq([0, 1, 2])
    end

    it "leaves no scheduler installed after Fiber.set_scheduler(nil)", contract: :close_uninstalls do
      got = with_scheduler(factory) do |scheduler|
        installed = Fiber.scheduler.equal?(scheduler)
        Fiber.schedule { sleep 0.01 }
        Fiber.set_scheduler(nil)
        [installed, Fiber.scheduler]
      end
      expect(got).to eq([true, nil])
    end
  end

  # Runs when the group is defined: every `pending:`/`skip:` key must name an
  # example above, so that a renamed example cannot silently lose its marker.
  known = descendants.flat_map(&:examples).map { |example| example.metadata[:contract] }
  unknown = (differences[:pending].keys + differences[:skip].keys) - known
  raise ArgumentError, "unknown Fiber::Scheduler contract keys: #{unknown.inspect}" unless unknown.empty?
end
