# frozen_string_literal: true

# Async (and async-http) on IO::Event::Selector::Farce. Every test runs twice:
# in TestAsyncOnFarce with IO_EVENT_SELECTOR=Farce, and in TestAsyncOnDefault
# with io-event's own choice (EPoll here), which shows the tests test Async's
# behaviour and not something only our selector does. Each test also asserts
# which selector class the reactor really used.
#
# Needs Async, io-event and async-http (Debian sid's Ruby 3.3 in the chroot:
# .ci/sid-run ruby -Ilib -Itest test/io_event/test_async_on_farce.rb).
# Where they are missing (the host's Ruby 3.1) the file skips with the reason.
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "tempfile"
require "net/http"

require_relative "libraries"
require_relative "../support/free_port"

ASYNC_MISSING = IOEventTestLibraries.missing(
  "Async/io-event/async-http", "async", "async/queue", "async/semaphore", "async/http/client", "async/http/internet",
  File.expand_path("../../examples/async_http_app", __dir__) # requires farce/io_event
)
warn "test_async_on_farce: skipping: #{ASYNC_MISSING}" if ASYNC_MISSING

module AsyncSelectorTests
  include FreePort

  def setup
    skip ASYNC_MISSING if ASYNC_MISSING
    @saved_env = ENV["IO_EVENT_SELECTOR"]
    if self.class::SELECTOR then ENV["IO_EVENT_SELECTOR"] = self.class::SELECTOR else ENV.delete("IO_EVENT_SELECTOR") end
    # A hung test fails instead of stalling the run (and exercises the
    # selector's interruptible kernel wait).
    main = Thread.current
    @watchdog = Thread.new { sleep 60; main.raise(RuntimeError, "#{name} still running after 60 s") }
  end

  def teardown
    @watchdog&.kill
    ENV["IO_EVENT_SELECTOR"] = @saved_env if defined?(@saved_env)
    ENV.delete("IO_EVENT_SELECTOR") if defined?(@saved_env) && @saved_env.nil?
  end

  def expected_selector
    self.class::SELECTOR ? IO::Event::Selector.const_get(self.class::SELECTOR) : IO::Event::Selector.default({})
  end

  # Runs the block in a reactor and checks which selector it ran on.
  def reactor(&block)
    Sync do |task|
      assert_equal expected_selector, Fiber.scheduler.instance_variable_get(:@selector).class
      block.call(task)
    end
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def test_tasks_run_and_return_values
    reactor do |task|
      tasks = 100.times.map { |i| task.async { task.yield; i * 2 } }
      assert_equal 100.times.map { |i| i * 2 }, tasks.map(&:wait)
      nested = task.async { |t| t.async { :inner }.wait }
      assert_equal :inner, nested.wait
    end
  end

  def test_sleeps_run_concurrently
    reactor do |task|
      start = monotonic
      order = []
      [0.15, 0.05, 0.1].each { |d| task.async { sleep d; order << d } }
      task.children.each(&:wait)
      elapsed = monotonic - start
      assert_equal [0.05, 0.1, 0.15], order
      assert_operator elapsed, :>=, 0.14
      assert_operator elapsed, :<, 0.6
    end
  end

  def test_with_timeout_interrupts_io_and_the_descriptor_stays_usable
    r, w = IO.pipe
    reactor do |task|
      start = monotonic
      assert_raises(Async::TimeoutError) { task.with_timeout(0.05) { r.read(1) } }
      assert_operator monotonic - start, :<, 0.5
      assert_raises(Async::TimeoutError) { task.with_timeout(0.02) { sleep 10 } }
      reader = task.async { r.read(5) }
      w.write("hello")
      assert_equal "hello", reader.wait
    end
  ensure
    r&.close
    w&.close
  end

  def test_queue_between_producer_and_consumers
    reactor do |task|
      queue = Async::Queue.new
      got = []
      consumers = 3.times.map do
        task.async { while (item = queue.dequeue) != :done do got << item end }
      end
      producer = task.async do
        200.times { |i| queue.enqueue(i); sleep 0 if i % 17 == 0 }
        3.times { queue.enqueue(:done) }
      end
      producer.wait
      consumers.each(&:wait)
      assert_equal (0...200).to_a, got.sort
    end
  end

  def test_semaphore_limits_concurrency
    reactor do |task|
      semaphore = Async::Semaphore.new(3, parent: task)
      running = max = 0
      jobs = 20.times.map do
        semaphore.async do
          running += 1
          max = running if running > max
          sleep 0.01
          running -= 1
        end
      end
      jobs.each(&:wait)
      assert_equal 3, max
      assert_equal 0, running
    end
  end

  def test_stop_while_waiting_in_io_wait
    r, w = IO.pipe
    reactor do |task|
      ensured = false
      waiter = task.async do
        r.wait_readable
        flunk "wait_readable returned after stop"
      ensure
        ensured = true
      end
      reader = task.async { r.read(1) } # a second fiber in io_read on the same pipe
      sleep 0.02
      waiter.stop
      reader.stop
      assert waiter.stopped?
      assert reader.stopped?
      assert ensured
      # the cancelled waits must not swallow the next wakeup
      again = task.async { r.read(3) }
      w.write("abc")
      assert_equal "abc", again.wait
    end
  ensure
    r&.close
    w&.close
  end

  # Three children wait side by side, and the loop runs while they do: each
  # child exits only once it read its byte from a pipe, which a task of this
  # reactor writes after the three waits began. (A wait that blocked the
  # thread would keep that task from running: the children's own timeout
  # would end them with status 99.) It was timed (all three within 0.6 s of
  # 0.2 s sleeps, and a 10 ms ticker's count): a busy machine took longer to
  # start three shells.
  def test_child_processes
    r, w = IO.pipe
    reactor do |task|
      pids = [3, 0, 7].map do |code|
        Process.spawn("timeout 60 dd bs=1 count=1 status=none >/dev/null || exit 99; exit #{code}", in: r)
      end
      waits = pids.map { |pid| task.async { Process.wait2(pid)[1] } }
      released = task.async { w.write("abc") } # runs once the three waits parked
      statuses = waits.map(&:wait)
      released.wait
      assert_equal [3, 0, 7], statuses.map(&:exitstatus)
      out = IO.popen(["echo", "from child"], &:read)
      assert_equal "from child\n", out
    end
  ensure
    r&.close
    w&.close
  end


  # Falcon's threaded container runs one reactor per thread: each gets its
  # own selector (and, on farce, its own core), all at the same time.
  def test_a_reactor_in_each_of_several_threads
    results = 4.times.map do |t|
      Thread.new do
        Sync do |task|
          assert_equal expected_selector, Fiber.scheduler.instance_variable_get(:@selector).class
          r, w = IO.pipe
          reader = task.async { r.read }
          ticks = task.async { 20.times.sum { sleep 0.001; 1 } }
          20.times { |i| w.write("#{t}:#{i},"); sleep 0.001 }
          w.close
          [reader.wait, ticks.wait]
        ensure
          r&.close
        end
      end
    end.map(&:value)
    results.each_with_index do |(text, ticks), t|
      assert_equal 20.times.map { |i| "#{t}:#{i}," }.join, text
      assert_equal 20, ticks
    end
  end

  # Falcon's process model (Falcon::Service::Server): the master binds the
  # port inside a short reactor (`Sync { endpoint.bound }`) and then forks
  # workers, each running its own reactor on the shared listening socket. The
  # master's reactor must not start farce's Go runtime (a forked child of a
  # process whose runtime started can never use it); the workers start it.
  def test_falcon_style_prefork_master_binds_in_a_reactor_then_workers_serve
    script = <<~'RUBY'
      require ARGV[0] # examples/async_http_app.rb
      endpoint = Async::HTTP::Endpoint.parse("http://127.0.0.1:0")
      bound = Sync { endpoint.bound }
      port = bound.sockets.first.local_address.ip_port
      master_loaded = Farce.core_loaded?
      app = ->(_env) { [200, {}, ["#{Process.pid} #{AsyncHttpApp.selector_name}"]] }
      workers = 2.times.map do
        fork do
          Async do
            Async::HTTP::Server.new(AsyncHttpApp.adapter(app), bound, protocol: endpoint.protocol,
                                    scheme: endpoint.scheme).run
          end
        end
      end
      puts "READY #{port} #{workers.join(",")} #{master_loaded}"
      $stdout.flush
      $stdin.read # until the test is done
      workers.each { |pid| Process.kill(:TERM, pid) }
      workers.each { |pid| Process.wait(pid) }
    RUBY
    env = self.class::SELECTOR ? { "IO_EVENT_SELECTOR" => self.class::SELECTOR } : {}
    IO.popen(env, [RbConfig.ruby, "-I#{File.expand_path('../../lib', __dir__)}", "-e", script,
                   File.expand_path("../../examples/async_http_app.rb", __dir__)], "r+") do |master|
      ready = master.gets.to_s.split
      assert_equal "READY", ready[0], "the master did not start"
      port = Integer(ready[1])
      workers = ready[2].split(",").map { |pid| Integer(pid) }
      assert_equal "false", ready[3], "the master's reactor must not start the Go runtime"

      served = Hash.new(0)
      bodies = Queue.new
      deadline = monotonic + 20
      4.times.map do
        Thread.new do
          until (served.size == 2 && served.values.sum >= 40) || monotonic > deadline
            response = Net::HTTP.get_response("127.0.0.1", "/", port)
            bodies << [response.code, response.body]
            served[response.body.split.first.to_i] += 1
          end
        end
      end.each(&:join)
      bodies.close
      # (Whether a worker's Go runtime has started is not asked: it starts at
      # the worker's first wait, which a worker that finds connections and
      # requests already queued may not have made yet.)
      until (code, body = bodies.pop).nil?
        assert_equal "200", code
        pid, selector = body.split
        assert_includes workers, pid.to_i
        assert_equal expected_selector.name, selector, "each worker's reactor runs on #{expected_selector.name}"
      end
      assert_equal workers.sort, served.keys.sort, "both workers accepted connections (#{served})"
      master.close_write
    end
    assert $?.success?, "the master exits once its workers are stopped"
  end

  def test_async_http_client_and_server_exchange_1000_concurrent_requests
    url = "http://127.0.0.1:#{free_port}"
    reactor do |task|
      server = AsyncHttpApp.server(url).run
      client = Async::HTTP::Client.new(Async::HTTP::Endpoint.parse(url), limit: 1000)
      bodies = 1000.times.map do |i|
        task.async do
          response = client.get("/echo?#{i}")
          [response.status, response.read]
        end
      end.map(&:wait)
      assert_equal 1000.times.map { |i| [200, i.to_s] }, bodies
      # and the plain app route, over the connections kept alive
      response = client.get("/")
      assert_equal AsyncHttpApp::BODY, response.read
    ensure
      client&.close
      server&.stop
    end
  end
end

class TestAsyncOnFarce < Minitest::Test
  SELECTOR = "Farce"
  include AsyncSelectorTests

  def test_requiring_does_not_start_go
    skip ASYNC_MISSING if ASYNC_MISSING
    out = IO.popen([RbConfig.ruby, "-I#{File.expand_path('../../lib', __dir__)}", "-rfarce/io_event", "-e",
                    "print Farce.core_loaded?, ' ', IO::Event::Selector::Farce.name"], &:read)
    assert_equal "false Farce::IOEventSelector", out
  end

  # Async 2.46 never calls io_pread/io_pwrite, and io-event's EPoll selector
  # does not have them, so these call the selector directly with the
  # arguments Ruby 3.3's scheduler interface passes (fiber, io, buffer, from,
  # length, offset) and check the file with plain Ruby. As with io_read,
  # length is a minimum: the call moves as much as the buffer holds.
  def test_positional_read_and_write_through_the_selector
    Tempfile.create("farce-pread") do |file|
      file.write("0123456789")
      file.flush
      reactor do
        selector = Fiber.scheduler.instance_variable_get(:@selector)
        out = IO::Buffer.for(+"..hello")
        assert_equal 5, selector.io_pwrite(Fiber.current, file, out, 3, 5, 2)
        assert_equal "012hello89", File.read(file.path)

        into = IO::Buffer.new(16)
        assert_equal 7, selector.io_pread(Fiber.current, file, into, 3, 5, 4), "up to the end of the file"
        assert_equal "hello89", into.get_string(4, 7)
        small = IO::Buffer.new(3)
        assert_equal 3, selector.io_pread(Fiber.current, file, small, 1, 0, 0), "length 0: one read, as much as fits"
        assert_equal "12h", small.get_string
        assert_equal 0, selector.io_pread(Fiber.current, file, into, 100, 4, 0), "past the end of the file"
        assert_equal "012hello89", file.tap(&:rewind).read, "positional calls leave the file position alone"
      end
    end
  end

  def test_positional_calls_report_errno
    Tempfile.create("farce-pread") do |file|
      write_only = File.open(file.path, "w")
      reactor do
        selector = Fiber.scheduler.instance_variable_get(:@selector)
        into = IO::Buffer.new(8)
        assert_equal(-Errno::EBADF::Errno, selector.io_pread(Fiber.current, write_only, into, 0, 4, 0))
        assert_equal(-Errno::EINVAL::Errno, selector.io_pwrite(Fiber.current, write_only, into, -1, 4, 0),
                     "a negative file position")
        assert_equal(-Errno::EINVAL::Errno, selector.io_pread(Fiber.current, file, into, 0, 9, 0),
                     "length beyond the buffer")
      end
    ensure
      write_only&.close
    end
  end

  # Ruby 4.0 calls io_close before closing a descriptor (io-event's own
  # selectors have no such hook): a fiber waiting on it raises IOError at
  # once instead of after the close scan, and the number is free for reuse.
  def test_io_close_wakes_a_waiter_with_ioerror
    r, w = IO.pipe
    reactor do |task|
      waiter = task.async { r.wait_readable }
      sleep 0.01
      start = monotonic
      selector = Fiber.scheduler.instance_variable_get(:@selector)
      assert_nil selector.io_close(r)
      assert_raises(IOError) { waiter.wait }
      assert_operator monotonic - start, :<, 0.04, "io_close must not wait for the 50 ms close scan"
      assert_nil selector.io_close(r.fileno), "a descriptor nobody waits on is ignored"
    end
  ensure
    r&.close
    w&.close
  end

  def test_selector_is_inert_after_fork
    skip ASYNC_MISSING if ASYNC_MISSING
    selector = IO::Event::Selector::Farce.new(Fiber.current)
    pid = fork { exit!(selector.closed? ? 0 : 1) }
    assert Process.wait2(pid)[1].success?, "a selector inherited through fork must report closed?"
    refute selector.closed?
  ensure
    selector&.close
  end
end

class TestAsyncOnDefault < Minitest::Test
  SELECTOR = nil # io-event's choice: EPoll on Linux
  include AsyncSelectorTests
end
