# frozen_string_literal: true

# Async on farce's io-event selector across fork: a Falcon-style master
# whose reactor *waited* on farce (so its Go runtime started) forks 4
# workers; each worker's reactor loads a fresh copy of farce's core and
# serves async-http on the shared socket. Load: wrk when it is on PATH,
# otherwise Ruby threads (Debian sid's chroot, where CI runs Ruby 3.3, has
# no wrk). Requests close their connection, so the kernel spreads them over
# the workers. Needs Async and async-http (Ruby 3.3 in the chroot:
# ruby -Ilib -Itest test/io_event/test_fork_async.rb); skips elsewhere.
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "net/http"
require "rbconfig"

require_relative "libraries"

ASYNC_FORK_MISSING = IOEventTestLibraries.missing("Async/async-http", "async", "async/http/server", "async/http/endpoint")

class TestForkAsyncOnFarce < Minitest::Test
  WORKERS = 4
  APP = File.expand_path("../../examples/async_http_app.rb", __dir__)

  MASTER = <<~'RUBY'
    require ARGV[0] # examples/async_http_app.rb (requires farce/io_event)
    endpoint = Async::HTTP::Endpoint.parse("http://127.0.0.1:0")
    bound = nil
    Sync do
      bound = endpoint.bound
      # The master's reactor waits before it forks (a health check, DNS...):
      # a timer and a pipe, so farce's Go runtime starts here.
      r, w = IO.pipe
      Async { sleep 0.01; w.write("x") }
      r.read(1)
    end
    port = bound.sockets.first.local_address.ip_port
    master = "#{Farce.core_loaded?}/#{Farce.core_info[:kind]}"
    workers = Integer(ARGV[1]).times.map do
      fork do
        served = 0
        app = lambda do |_env|
          served += 1
          [200, {}, ["#{Process.pid} #{AsyncHttpApp.selector_name}"]]
        end
        begin
          Sync do
            Async::HTTP::Server.new(AsyncHttpApp.adapter(app), bound, protocol: endpoint.protocol,
                                    scheme: endpoint.scheme).run
          end
        rescue SignalException, Interrupt
          nil # TERM from the master
        ensure
          info = Farce.core_info
          $stdout.write("worker #{Process.pid} served #{served} core=#{info[:kind]}/#{info[:generation]}\n") # one write: workers share stdout
          $stdout.flush
        end
        exit!(0)
      end
    end
    puts "READY #{port} #{workers.join(",")} #{master}"
    $stdout.flush
    $stdin.read # until the test is done
    workers.each { |pid| Process.kill(:TERM, pid) }
    workers.each { |pid| Process.wait(pid) }
  RUBY

  def setup
    skip ASYNC_FORK_MISSING if ASYNC_FORK_MISSING
  end

  # A child forked inside an Async task whose reactor waited on the
  # selector (on farce's, its Go runtime started). Async (2.35+, on Ruby
  # before 4) drops the inherited scheduler in Process._fork, and Ruby 4.0
  # drops it itself, so the selector the parent's reactor ran on is never
  # called: the child does plain blocking I/O. What it may do then, as
  # Async supports it (ARGV[0]):
  #   thread   a reactor of its own in a new thread (Sync in a new thread)
  #   reactor  a reactor of its own in a blocking fiber (Async::Reactor.new)
  #   sync     Sync in the forked task itself: Sync finds the task it runs
  #            in (Task.current?) and runs the block on the parent's reactor,
  #            which Async cleared in the child (before Ruby 4) or left as it
  #            was (4.0): Async's own limit (test_sync_in_the_forked_task_...)
  # Each prints one line the tests compare under IO_EVENT_SELECTOR=Farce and
  # under io-event's default (EPoll where its native part is built).
  FORK_IN_TASK = <<~'RUBY'
    require "async"
    require "farce/io_event"
    $stdout.sync = true
    flow = ARGV[0]
    selector_of = -> { Fiber.scheduler&.instance_variable_get(:@selector)&.class }
    Sync do |task|
      r0, w0 = IO.pipe
      task.async { sleep 0.01; w0.write("x") }
      r0.read(1) # the reactor waited on its selector (farce's: its Go runtime started)
      puts "parent selector=#{selector_of.call} core_loaded=#{Farce.core_loaded?}"
      pid = fork do
        out = ["scheduler=#{Fiber.scheduler.class}"]
        sleep 0.01
        r, w = IO.pipe
        w.write("y")
        out << "plain=#{r.read(1)}"
        serve = lambda do |t|
          t.async { sleep 0.02; w.write("z") }
          out << "child_reactor=#{r.read(1)} selector=#{selector_of.call}"
        end
        case flow
        when "thread" then Thread.new { Sync(&serve) }.join
        when "reactor"
          Fiber.new(blocking: true) do
            Async::Reactor.new.run(&serve).wait
          ensure
            Fiber.set_scheduler(nil)
          end.resume
        when "sync" then Sync(&serve)
        end
        puts out.join(" ")
        exit!(0)
      rescue Exception => e # rubocop:disable Lint/RescueException -- report whatever it is
        puts "#{out.join(' ')} child raised #{e.class}: #{e.message}"
        exit!(1)
      end
      puts "child status=#{Process.wait2(pid)[1].exitstatus}"
    end
  RUBY

  # FORK_IN_TASK's output for flow under selector (nil: io-event's default).
  def fork_in_task(flow, selector)
    env = selector ? { "IO_EVENT_SELECTOR" => selector } : {}
    cmd = [RbConfig.ruby, "-I#{File.expand_path('../../lib', __dir__)}", "-e", FORK_IN_TASK, flow]
    IO.popen(env, cmd, unsetenv_others: false, err: %i[child out], pgroup: true) do |io|
      watchdog = Thread.new { sleep 60; Process.kill(:KILL, -io.pid) }
      io.read.tap { watchdog.kill }
    end
  end

  # The selector classes each run is asked for: farce's, and io-event's own
  # choice (EPoll on Ruby 3.3 in the chroot, Select where no native part
  # is built for the Ruby).
  def selectors
    { "Farce" => "Farce::IOEventSelector", nil => IO::Event::Selector.default({}).name }
  end

  def assert_child_ran_a_reactor_of_its_own(flow)
    selectors.each do |selector, name|
      out = fork_in_task(flow, selector)
      assert_match(/parent selector=#{name} core_loaded=#{selector ? true : false}$/, out)
      assert_match(/scheduler=NilClass plain=y child_reactor=z selector=#{name}$/, out, "#{flow} under #{name}")
      assert_match(/child status=0/, out)
    end
  end

  def test_a_child_forked_inside_a_task_runs_a_reactor_in_a_new_thread
    assert_child_ran_a_reactor_of_its_own("thread")
  end

  def test_a_child_forked_inside_a_task_runs_a_reactor_in_a_blocking_fiber
    assert_child_ran_a_reactor_of_its_own("reactor")
  end

  # Async's own limit, the same under either selector before Ruby 4: Sync in
  # the forked task runs on the parent's reactor, whose selector Async's
  # Process._fork hook cleared (Async 2.46: NoMethodError, `resume' for
  # nil). On Ruby 4.0 Async leaves its fork hook out (Ruby clears the
  # thread's scheduler itself) and the reactor keeps the parent's selector:
  # io-event's Select, plain Ruby objects, goes on in the child on its
  # parent's state; farce's cannot use its parent's Go runtime and says so.
  def test_sync_in_the_forked_task_is_asyncs_own_limit
    farce = fork_in_task("sync", "Farce")
    default = fork_in_task("sync", nil)
    assert_match(/scheduler=NilClass plain=y child raised/, farce)
    assert_match(/child status=1/, farce)
    if RUBY_VERSION < "4"
      failure = ->(out) { out[/child raised (\w+(?:::\w+)*)/, 1] }
      assert_equal "NoMethodError", failure.(default), default
      assert_equal failure.(default), failure.(farce), "under Farce:\n#{farce}\nunder #{selectors[nil]}:\n#{default}"
    else
      assert_match(/child raised Farce::Error: this IO::Event::Selector::Farce was created before fork and is inert/, farce)
    end
  end

  def test_workers_of_a_master_whose_reactor_waited_on_farce_serve_under_load
    env = { "IO_EVENT_SELECTOR" => "Farce" }
    cmd = [RbConfig.ruby, "-I#{File.expand_path('../../lib', __dir__)}", "-e", MASTER, APP, WORKERS.to_s]
    IO.popen(env, cmd, "r+", err: %i[child out], pgroup: true) do |master|
      watchdog = Thread.new { sleep 120; Process.kill(:KILL, -master.pid) }
      lines = [] # io-event may warn first (e.g. that its native selectors are missing)
      while (line = master.gets)
        lines << line
        break if line.start_with?("READY")
      end
      ready = lines.last.to_s.split
      assert_equal "READY", ready[0], "the master did not start:\n#{lines.join}"
      port = Integer(ready[1])
      workers = ready[2].split(",").map { |pid| Integer(pid) }
      assert_equal "true/file", ready[3], "the master's reactor waited, so its Go runtime started"

      requests, errors, tool = load(port)
      assert_operator requests, :>, 0
      assert_equal 0, errors, "error responses under #{tool}"

      master.close_write
      report = master.read
      watchdog.kill
      counts = workers.to_h { |pid| [pid, Integer(report[/^worker #{pid} served (\d+) /, 1] || -1)] }
      workers.each { |pid| assert_match(%r{^worker #{pid} served \d+ core=(memfd|tmpfile)/1$}, report) }
      counts.each { |pid, n| assert_operator n, :>, 0, "worker #{pid} served nothing (#{tool}):\n#{report}" }
      assert_operator counts.values.sum, :>=, requests, "workers' counts against #{tool}'s:\n#{report}"
      puts "\nasync prefork: #{tool} #{requests} responses, per worker #{counts.values.join(' ')}" if ENV["VERBOSE"]
    end
    assert $?.success?, "the master exits once its workers are stopped"
  end

  private

  # Returns [responses, errors, tool].
  def load(port)
    if system("command -v wrk > /dev/null")
      out = `wrk -t2 -c32 -d3s -H "Connection: close" http://127.0.0.1:#{port}/ 2>&1`
      errors = out[/Non-2xx or 3xx responses: (\d+)/, 1].to_i + out.scan(/(?:connect|read|write|timeout) (\d+)/).flatten.sum(&:to_i)
      [Integer(out[/(\d+) requests in/, 1]), errors, "wrk"]
    else
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 3
      results = 8.times.map do
        Thread.new do
          ok = bad = 0
          while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
            response = Net::HTTP.get_response("127.0.0.1", "/", port)
            response.code == "200" ? ok += 1 : bad += 1
          end
          [ok, bad]
        end
      end.map(&:value)
      [results.sum(&:first), results.sum(&:last), "Ruby's Net::HTTP (no wrk on PATH)"]
    end
  end
end
