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

  # A child forked inside an Async task whose reactor
  # waited on farce. Async (2.35+) drops the inherited scheduler in
  # Process._fork, as for io-event's own selectors, so farce's inert selector
  # is never called: the child does plain blocking I/O, and a reactor of its
  # own (in a new thread: Sync in the forking task would reuse the parent's
  # task, on every selector) runs on a fresh copy of farce's core.
  FORK_IN_TASK = <<~'RUBY'
    require "async"
    require "farce/io_event"
    $stdout.sync = true
    selector_of = -> { Fiber.scheduler.instance_variable_get(:@selector).class }
    Sync do |task|
      r0, w0 = IO.pipe
      task.async { sleep 0.01; w0.write("x") }
      r0.read(1) # the reactor waited on farce: its Go runtime started
      puts "parent core_loaded=#{Farce.core_loaded?} selector=#{selector_of.call}"
      pid = fork do
        out = ["scheduler=#{Fiber.scheduler.class}"]
        sleep 0.01
        r, w = IO.pipe
        w.write("y")
        out << "plain=#{r.read(1)}"
        Thread.new do
          Sync do |t|
            t.async { sleep 0.02; w.write("z") }
            out << "child_reactor=#{r.read(1)} selector=#{selector_of.call}"
          end
        end.join
        puts out.join(" ")
        exit!(0)
      rescue Exception => e # rubocop:disable Lint/RescueException -- report whatever it is
        puts "child raised #{e.class}: #{e.message}"
        exit!(1)
      end
      puts "child status=#{Process.wait2(pid)[1].exitstatus}"
    end
  RUBY

  def test_a_child_forked_inside_a_task_does_plain_io_and_runs_a_reactor_of_its_own
    skip ASYNC_FORK_MISSING if ASYNC_FORK_MISSING
    env = { "IO_EVENT_SELECTOR" => "Farce" }
    cmd = [RbConfig.ruby, "-I#{File.expand_path('../../lib', __dir__)}", "-e", FORK_IN_TASK]
    out = IO.popen(env, cmd, err: %i[child out], pgroup: true) do |io|
      watchdog = Thread.new { sleep 60; Process.kill(:KILL, -io.pid) }
      io.read.tap { watchdog.kill }
    end
    assert_match(/parent core_loaded=true selector=Farce::IOEventSelector/, out)
    assert_match(/scheduler=NilClass plain=y child_reactor=z selector=Farce::IOEventSelector/, out)
    assert_match(/child status=0/, out)
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
