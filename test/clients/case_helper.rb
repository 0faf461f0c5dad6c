# frozen_string_literal: true

# What every file of the real-clients suite (test/clients/*_test.rb, run by
# `rake test:clients`) shares: the servers' addresses, the loop a case runs
# on (farce with FARCE_BACKEND, or Async with io-event's selector for the
# comparison), and #clients_case, which runs one case in a child process
# with a ticker fiber measuring the loop's worst gap.
#
# The file names end in _test.rb, not test_*.rb, so that `rake minitest` and
# `rake test` (which glob test/**/test_*.rb) do not load them: they need the
# servers that only `rake test:clients` starts. Loaded by hand without those
# servers, every case skips and says so.
require "minitest/autorun"
require "io/wait"
require "json"
require "timeout"

module ClientsSuite
  PG = ENV["FARCE_CLIENTS_PG"] # a libpq connection string
  MYSQL_PORT = ENV["FARCE_CLIENTS_MYSQL_PORT"]&.to_i
  REDIS_PORT = ENV["FARCE_CLIENTS_REDIS_PORT"]&.to_i
  # "farce" (the default) or "async": Async's own scheduler on io-event's
  # selector (IO_EVENT_SELECTOR, EPoll in the suite), the comparison.
  LOOP = ENV.fetch("FARCE_CLIENTS_LOOP", "farce")
  # Where each case appends its result as one JSON line (the rake task's table).
  RESULTS = ENV["FARCE_CLIENTS_RESULTS"]
  # Keys, channels and queue names start with this, so that two runs
  # sharing one server (the rake task runs its legs one after another, but
  # a developer may not) never see each other's data.
  PREFIX = "farce-#{Process.pid}"
  TICK = 0.005 # the ticker's sleep; its worst overshoot is the loop's worst gap
  STALL_THRESHOLD = 0.1 # farce's stall reports, for the calls that block by design
  CASE_TIMEOUT = Integer(ENV.fetch("FARCE_CLIENTS_CASE_TIMEOUT", "20"))
  # The loop's library, loaded here once rather than in every case's child
  # (Async's require alone is about 0.1 s a case). Neither starts anything
  # when loaded: farce's Go core is opened at its first use, in the child.
  LOOP == "async" ? require("async") : require("farce")

  def self.loop_name
    LOOP == "async" ? "async-#{ENV.fetch('IO_EVENT_SELECTOR', 'default')}" : (ENV["FARCE_BACKEND"] || "auto")
  end

  # What a case's block gets: the fibers it starts, the stall reports, and
  # notes for the output.
  class Context
    attr_reader :stalls, :notes

    def initialize
      @stalls = []
      @notes = []
    end

    def farce?
      LOOP != "async"
    end

    # Runs the block in n fibers (the index as argument) and waits for all
    # of them; returns their values in index order, or raises the first
    # exception one of them raised (with the others finished or failed
    # first, so nothing is left running). Errors are carried back through
    # the queue because an exception that ends a fiber is reported
    # differently by farce and by Async.
    def fibers(count, &block)
      done = Thread::Queue.new
      count.times do |i|
        Fiber.schedule do
          done << [i, true, block.call(i)]
        rescue Exception => e # rubocop:disable Lint/RescueException -- carried to the waiting fiber
          done << [i, false, e]
        end
      end
      results = Array.new(count)
      error = nil
      count.times do
        i, ok, value = done.pop
        ok ? results[i] = value : error ||= value
      end
      raise error if error

      results
    end

    # Starts one fiber and returns a handle whose #value waits for it.
    def fiber(&block)
      done = Thread::Queue.new
      Fiber.schedule do
        done << [true, block.call]
      rescue Exception => e # rubocop:disable Lint/RescueException -- carried to #value
        done << [false, e]
      end
      Handle.new(done)
    end

    def note(text)
      @notes << text
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # Seconds the block took.
    def timed
      t = now
      yield
      now - t
    end
  end

  # A fiber started by Context#fiber.
  class Handle
    def initialize(queue)
      @queue = queue
    end

    def value
      @result ||= @queue.pop
      ok, value = @result
      raise value unless ok

      value
    end
  end

  # Included in each test class of the suite.
  module Case
    # One case: runs the block in a child process (so that a case that hangs
    # the loop is killed after CASE_TIMEOUT seconds and reported, and every
    # case starts on a fresh loop), under farce or Async, with a ticker fiber
    # that records the loop's worst gap. The child sends back how it went;
    # an assertion that failed there fails here. blocks: names the calls of
    # the case that hold the loop by design (the output says so).
    # holds_the_loop: the case's point is a call that blocks by design (its
    # gap is the call's length, and the table leaves it out of the worst gap).
    # limit: why the library itself fails the case under every scheduler,
    # when it does (the rake task prints it beside such a case).
    def clients_case(library, name, needs: nil, blocks: nil, holds_the_loop: false, limit: nil, timeout: CASE_TIMEOUT,
                     &block)
      @clients_row = { library: library, case: name, ruby: RUBY_VERSION[/\A\d+\.\d+/], loop: ClientsSuite.loop_name,
                       blocks: blocks, holds_the_loop: holds_the_loop, limit: limit }.compact
      missing = Array(needs).reject { |server| server_address(server) }
      skip "no #{missing.join(', ')} server: run this suite with `rake test:clients`, which starts them" unless missing.empty?

      reader, writer = IO.pipe
      reader.binmode
      writer.binmode
      started = now
      pid = fork do
        # whatever happens here, the child ends here: it must never go back
        # into minitest's run as a second copy of the suite
        reader.close
        parent = Process.ppid
        # a case that hangs must not outlive its test process, even one killed outright
        Thread.new { sleep 0.5 while Process.ppid == parent; exit!(1) }
        outcome = run_in_child(&block)
        writer.write(Marshal.dump(outcome))
        writer.close
      rescue Exception => e # rubocop:disable Lint/RescueException -- reported, then exit!
        warn "clients: the child of #{library} #{name.inspect} could not answer: #{e.class}: #{e.message}"
      ensure
        exit!(0)
      end
      writer.close
      outcome = receive(reader, pid, timeout)
      @clients_row.merge!(wall: (now - started).round(3))
      self.assertions += outcome.fetch(:assertions, 0) # made in the child
      @clients_row.merge!(outcome.reject { |k, _| %i[error assertions].include?(k) })
      raise outcome[:error] if outcome[:error]
    ensure
      reader&.close
    end

    def after_teardown
      super
      return unless @clients_row

      row = @clients_row.merge(status: skipped? ? "skip" : passed? ? "pass" : "fail")
      # the message without the backtrace an unexpected error carries
      row[:failure] = failures.first.message.lines.grep_v(/\A\s/).first(2).join(" ").strip if row[:status] == "fail" && failures.first
      print_row(row)
      return unless RESULTS

      File.open(RESULTS, "a") do |f|
        f.flock(File::LOCK_EX)
        f.puts(JSON.generate(row))
      end
    end

    private

    def server_address(server)
      { pg: PG, mysql: MYSQL_PORT, redis: REDIS_PORT }.fetch(server)
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # In the child: installs the loop, runs the ticker and the case, and
    # returns a Hash (Marshal-able: the exception, if any, with its backtrace).
    def run_in_child(&block)
      context = Context.new
      worst_gap = 0.0
      error = nil
      elapsed = nil
      body = lambda do
        stop = false
        ticker = Fiber.schedule do
          until stop
            t = context.now
            sleep TICK
            gap = context.now - t - TICK
            worst_gap = gap if gap > worst_gap
          end
        end
        t = context.now
        begin
          block.call(context)
        ensure
          elapsed = context.now - t
          stop = true
        end
        ticker
      end
      begin
        if LOOP == "async"
          require "async"
          Sync { body.call }
        else
          require "farce"
          Farce.run(stall_threshold: STALL_THRESHOLD, on_stall: ->(report) { context.stalls << report }, &body)
        end
      rescue Exception => e # rubocop:disable Lint/RescueException -- every failure goes back to the parent
        error = e
      end
      stalls = context.stalls.map { |r| [r.duration.round(3), r.location.to_s.sub(%r{\A.*/(?=[^/]+/[^/]+:\d+)}, "")] }
      { error: portable(error), assertions: assertions, gap: worst_gap.round(4), body: elapsed&.round(3), notes: context.notes,
        stalls: stalls.max_by(3) { |d, _| d } , stall_count: stalls.size }
    end

    # An exception the parent can load: its own class when that is
    # Marshal-able and known there, else a RuntimeError saying what it was.
    def portable(error)
      return nil unless error

      Marshal.load(Marshal.dump(error))
      error
    rescue TypeError, ArgumentError, NameError
      copy = RuntimeError.new("#{error.class}: #{error.message}")
      copy.set_backtrace(error.backtrace || [])
      copy
    end

    def receive(reader, pid, timeout)
      data = +""
      deadline = now + timeout
      loop do
        left = deadline - now
        if left <= 0
          kill_tree(pid)
          Process.waitpid(pid)
          return { error: Minitest::Assertion.new("hung: no answer in #{timeout} s on #{ClientsSuite.loop_name} " \
                                                  "(Ruby #{RUBY_VERSION}); the child was killed") }
        end
        next unless reader.wait_readable(left)

        chunk = reader.read_nonblock(65_536, exception: false)
        break if chunk.nil?

        data << chunk unless chunk == :wait_readable
      end
      _, status = Process.waitpid2(pid)
      if data.empty?
        return { error: Minitest::Assertion.new("the child died without an answer (#{status.inspect}) " \
                                                "on #{ClientsSuite.loop_name}") }
      end

      Marshal.load(data) # rubocop:disable Security/MarshalLoad -- our own child's answer
    end

    # KILLs the child and every process it started (servers, pipelines),
    # however deep: a case killed for hanging must leave nothing running.
    # The descendants are found by parent pid in /proc, before any of them
    # dies and is reparented.
    def kill_tree(pid)
      parents = Dir["/proc/[0-9]*/stat"].to_h do |stat|
        [Integer(stat[%r{/proc/(\d+)/}, 1]), Integer(File.read(stat).sub(/\A\d+ \(.*\) /m, "").split[1])]
      rescue Errno::ENOENT, Errno::ESRCH, ArgumentError
        [0, 0]
      end
      tree = [pid]
      tree.each { |p| tree.concat(parents.select { |_, parent| parent == p }.keys) } # grows while it is walked
      tree.each do |p|
        Process.kill("KILL", p)
      rescue Errno::ESRCH
        nil
      end
    end

    def print_row(row)
      extras = []
      extras << "blocks by design: #{row[:blocks]}" if row[:blocks]
      extras << "#{row[:stall_count]} stall report(s), longest #{row[:stalls].first.inspect}" if row[:stall_count].to_i.positive?
      extras.concat(Array(row[:notes]))
      gap = row[:gap] ? format("%.1f ms", row[:gap] * 1000) : "-"
      $stdout.puts format("\nclients: %-4s %-7s %-52s %6s s  worst gap %9s%s", row[:status], row[:library], row[:case],
                          row[:wall] ? format("%.2f", row[:wall]) : "-", gap,
                          extras.empty? ? "" : "  [#{extras.join('; ')}]")
    end
  end
end
