# frozen_string_literal: true

# The Falcon serving check of rake test:peers: real Falcon (`falcon serve`
# from the peer suites folder, the rest Debian's) serving falcon_app.ru on a
# selector, in each of its parallelism models: threaded, forked, hybrid, and
# forked with a preload that runs an event loop in the master. For each:
#
# - plain requests, and the requests whose fiber another thread wakes
#   (Thread#value, Thread::Queue, Mutex, IO.select), one at a time and all at
#   once; a request with no answer in REQUEST_TIMEOUT seconds is a hang;
# - a worker killed with SIGKILL is replaced and the server goes on answering
#   (the models with worker processes);
# - SIGINT (as Ctrl-C sends it: to the whole process group) and SIGTERM (to
#   the master, as `kill PID`), each while clients keep it busy: the server
#   must exit within its graceful-stop time (Falcon's default, 1 s) plus
#   EXIT_MARGIN for Ruby's own teardown, and leave no process of its group.
#
# Each check's result is a PeerResults::Test, so the run under Farce compares
# with the run under EPoll as the suites do.
require "net/http"
require "socket"
require "rbconfig"
require_relative "results"
require_relative "../support/free_port"

class FalconServing
  include FreePort

  APP = File.join(__dir__, "falcon_app.ru")
  PRELOAD = File.join(__dir__, "falcon_preload.rb")
  MODES = {
    "threaded" => %w[--threaded -n 2],
    "forked" => %w[--forked -n 2],
    "hybrid" => %w[--hybrid --forks 2 --threads 2],
    "preload" => ["--forked", "-n", "2", "--preload", PRELOAD],
  }.freeze
  WAKES = %w[thread-value queue mutex io-select].freeze
  GRACE = 1.0 # falcon serve --graceful-stop, its default
  # Past the grace time the container kills what is left; what remains is
  # Ruby's exit. Generous, for a loaded CI machine: a hang takes forever.
  EXIT_MARGIN = 5.0
  REQUEST_TIMEOUT = 5
  START_TIMEOUT = 30
  REPLACE_TIMEOUT = 20

  def initialize(falcon_dir, rubylib, logs)
    @falcon = File.join(falcon_dir, "bin", "falcon")
    @rubylib = rubylib
    @logs = logs
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # All checks under one selector's environment: {key => PeerResults::Test}.
  def run(selector, env)
    @tests = {}
    MODES.each do |mode, args|
      %w[INT TERM].each_with_index do |signal, i|
        lifecycle(selector, env, mode, args, signal, full: i.zero?)
      end
    end
    @tests
  end

  private

  def record(mode, name, ok, detail = "", seconds: nil)
    key = "falcon serve --#{mode}: #{name}"
    @tests[key] = PeerResults::Test.new(key, key, ok ? "passed" : "failed", seconds, detail)
    puts "  #{ok ? 'ok  ' : 'FAIL'} #{key}#{" (#{detail})" unless detail.to_s.empty?}"
    ok
  end


  def get(port, path, timeout: REQUEST_TIMEOUT)
    http = Net::HTTP.new("127.0.0.1", port)
    http.open_timeout = timeout
    http.read_timeout = timeout
    http.max_retries = 0
    response = http.start { |h| h.get(path) }
    raise "HTTP #{response.code}: #{response.body}" unless response.code == "200"

    response.body
  end

  # [pid, ppid, pgrp, state] of every process, from /proc.
  def processes
    Dir["/proc/[0-9]*/stat"].filter_map do |stat|
      fields = File.read(stat).sub(/\A\d+ \(.*\) /m, "").split
      [Integer(stat[%r{/proc/(\d+)/}, 1]), Integer(fields[1]), Integer(fields[2]), fields[0]]
    rescue Errno::ENOENT, Errno::ESRCH, ArgumentError
      nil
    end
  end

  def children(pid) = processes.select { |_, ppid, _, state| ppid == pid && state != "Z" }.map(&:first).sort
  def group(pgid) = processes.select { |_, _, pgrp, state| pgrp == pgid && state != "Z" }.map(&:first)

  def kill_group(pgid)
    Process.kill(:KILL, -pgid)
  rescue Errno::ESRCH, Errno::EPERM
    nil
  end

  def wait_exit(pid, limit)
    deadline = now + limit
    loop do
      _, status = Process.wait2(pid, Process::WNOHANG)
      return status if status
      return nil if now > deadline

      sleep 0.02
    end
  end

  def lifecycle(selector, env, mode, args, signal, full:)
    port = free_port
    log = File.join(@logs, "falcon-serve-#{selector.downcase}-#{mode}-#{signal.downcase}.log")
    # Falcon's controller does Bundler.require(:preload) when it finds a
    # Gemfile, looking upwards from its directory: from the logs (under this
    # repository's tmp/) it found farce's own Gemfile and wrote a Gemfile.lock
    # of the chroot's gem versions beside it, which the host's bundler then
    # could not resolve. A Gemfile that does not exist is one it skips.
    no_gemfile = File.join(@logs, "no-Gemfile")
    pid = Process.spawn(env.merge("RUBYLIB" => @rubylib, "BUNDLE_GEMFILE" => no_gemfile), RbConfig.ruby, @falcon, "serve",
                        "-b", "http://127.0.0.1:#{port}", "-c", APP, "--graceful-stop", GRACE.to_s, *args,
                        chdir: @logs, in: File::NULL, out: log, err: %i[child out], pgroup: true)
    begin
      started = now
      body = nil
      until body == "ok"
        body = (get(port, "/", timeout: 2) rescue nil)
        break if body == "ok" || now - started > START_TIMEOUT || Process.wait2(pid, Process::WNOHANG)

        sleep 0.1
      end
      unless record(mode, "starts and serves (SIG#{signal} run)", body == "ok", body == "ok" ? "" : "no answer to / within #{START_TIMEOUT} s, see #{File.basename(log)}")
        return
      end

      if full
        wakes(mode, port)
        replace_worker(mode, pid, port) unless mode == "threaded"
      end
      stop_under_load(mode, pid, port, signal)
    ensure
      kill_group(pid)
      Process.wait2(pid, Process::WNOHANG) rescue nil
    end
  end

  def wakes(mode, port)
    WAKES.each do |wake|
      started = now
      body = begin
        get(port, "/wake/#{wake}")
      rescue Net::ReadTimeout
        "no answer within #{REQUEST_TIMEOUT} s (the fiber was never woken)"
      rescue StandardError => e
        "#{e.class}: #{e.message}"
      end
      record(mode, "a request woken by another thread: #{wake}", body == wake, body == wake ? "" : body, seconds: now - started)
    end
    # all at once, several of each, on the same workers
    results = WAKES.flat_map { |wake| Array.new(3) { wake } }.map do |wake|
      Thread.new do
        get(port, "/wake/#{wake}") == wake ? nil : "#{wake}: wrong answer"
      rescue Net::ReadTimeout
        "#{wake}: no answer within #{REQUEST_TIMEOUT} s"
      rescue StandardError => e
        "#{wake}: #{e.class}"
      end
    end.map(&:value).compact
    record(mode, "12 concurrent requests woken by other threads", results.empty?, results.tally.map { |r, n| "#{n}x #{r}" }.join(", "))
  end

  def replace_worker(mode, pid, port)
    workers = children(pid)
    if workers.empty?
      record(mode, "a SIGKILLed worker is replaced", false, "the master has no worker process")
      return
    end
    victim = workers.first
    Process.kill(:KILL, victim)
    started = now
    replaced = false
    until now - started > REPLACE_TIMEOUT
      current = children(pid)
      if current.size >= workers.size && !current.include?(victim)
        replaced = 4.times.all? { get(port, "/") == "ok" rescue false }
        break if replaced
      end
      sleep 0.1
    end
    record(mode, "a SIGKILLed worker is replaced", replaced,
           replaced ? "" : "workers #{workers.inspect}, killed #{victim}, now #{children(pid).inspect} after #{REPLACE_TIMEOUT} s",
           seconds: now - started)
  end

  def stop_under_load(mode, pid, port, signal)
    served = Queue.new
    stop = false
    paths = ["/slow", "/", "/wake/queue", "/wake/thread-value"]
    clients = Array.new(4) do |i|
      Thread.new do
        n = i
        until stop
          begin
            path = paths[n % paths.size]
            served << path if get(port, path, timeout: 3)
          rescue StandardError
            sleep 0.01
          end
          n += 1
        end
      end
    end
    sleep 1
    busy = served.size
    signalled = now
    signal == "INT" ? Process.kill(:INT, -pid) : Process.kill(:TERM, pid)
    status = wait_exit(pid, GRACE + EXIT_MARGIN)
    took = now - signalled
    stop = true
    clients.each { |t| t.join(REQUEST_TIMEOUT + 1) || t.kill }
    sleep 0.2 # the workers' own exit, after the master's
    left = group(pid)
    how = signal == "INT" ? "SIGINT to the group" : "SIGTERM to the master"
    ok = status && left.empty? && busy.positive?
    detail = if busy.zero? then "no request answered in the second before the signal"
             elsif status.nil? then "still running #{(GRACE + EXIT_MARGIN).round(1)} s after the signal"
             elsif !left.empty? then "exited (#{status.exitstatus || status.termsig}) but left #{left.size} process(es) running: #{left.inspect}"
             else "exited in #{took.round(2)} s, #{busy} requests answered in the second before"
             end
    record(mode, "#{how} under load: exits within #{GRACE} s grace + #{EXIT_MARGIN} s, nothing left running", ok, detail,
           seconds: took)
  end
end
