# frozen_string_literal: true

# Running the cases: one workload or HTTP run per contender, alternating over runs, and what
# each run measures besides its own output (wrk's figures, the server's CPU per thread).
module Bench
  class Runner
    def progress(text, final: false)
      elapsed = (now - @started).round
      line = format("bench %d:%02d %s", elapsed / 60, elapsed % 60, text)
      if @tty
        $stderr.print "\r\e[K#{line}"
        $stderr.print "\n" if final
      elsif final || @last_plain != text
        $stderr.puts line
        @last_plain = text
      end
    end

    def run_workload(kase, contender, label)
      cmd = workload_command(kase, contender)
      r, w = IO.pipe
      err_r, err_w = IO.pipe
      pid = Process.spawn(*cmd, out: w, err: err_w, in: File::NULL, pgroup: true, chdir: ROOT)
      w.close
      err_w.close
      reader = Thread.new { r.read }
      err_reader = Thread.new { err_r.read }
      t0 = now
      status = wait_or_kill(pid, kase.expect_s * 3 + 60) do
        progress("#{label} #{(now - t0).round}s") if @tty
      end
      out = reader.value
      err = err_reader.value
      r.close
      err_r.close
      unless status&.success?
        why = status ? "exit #{status.exitstatus || status.termsig}" : "timed out, killed"
        return { "error" => "#{why}: #{err.to_s.lines.grep_v(/\A\s+from /).first(3).join.strip}" }
      end
      JSON.parse(out.lines.last)
    rescue JSON::ParserError, NoMethodError => e
      { "error" => "bad output: #{e.message}" }
    end

    # The CPUs of an HTTP run (BENCH_PIN=0: none): the server (all its threads,
    # Go's included) on one, wrk on the other, so that neither takes the
    # other's CPU and the kernel cannot put both on one. [server's, wrk's]
    # as taskset prefixes, or empty ones on a machine with one CPU or without
    # taskset.
    def pin_prefixes
      @pin_prefixes ||= if ENV["BENCH_PIN"] == "0" || Etc.nprocessors < 2 || !which("taskset")
                          [[], []]
                        else
                          [%w[taskset -c 0], %w[taskset -c 1]]
                        end
    end

    # wrk with one thread (on its own CPU when pinned: a second thread would
    # only share that CPU with the first). Returns [output, wrk's CPU seconds].
    def run_wrk(args, timeout)
      before = Process.times
      out = capture([*pin_prefixes[1], "wrk", "-t1", *args], timeout)
      after = Process.times
      [out, (after.cutime + after.cstime) - (before.cutime + before.cstime)]
    end

    # wrk's CPU share above which the load generator, not the server, set the rate.
    WRK_BOUND_PCT = 90

    def run_http(kase, contender, label)
      cmd = [*pin_prefixes[0], *command(contender, "http_hello.rb", "0")]
      io = IO.popen(cmd, "r+", err: File::NULL, pgroup: true, chdir: ROOT)
      pid = io.pid
      ready = IO.select([io], nil, nil, 60) && io.gets
      port = ready.to_s[/\AREADY (\d+)/, 1]
      _, _, ruby_version, server_pid, ruby_tids = ready.to_s.split
      return { "error" => "server did not start: #{ready.inspect}" } unless port

      url = "http://127.0.0.1:#{port}/"
      c = kase.args[:connections]
      if kase.args[:warmup].positive?
        progress("#{label} warm-up")
        run_wrk(["-c#{c}", "-d#{kase.args[:warmup]}s", "--timeout", "10s", url], 60)
        drain(port.to_i, label)
      end
      cpu0 = thread_cpu(server_pid)
      t0 = now
      wrk = nil
      wrk_cpu = nil
      wrk_thread = Thread.new do
        wrk, wrk_cpu = run_wrk(["-c#{c}", "-d#{kase.args[:seconds]}s", "--latency", "--timeout", "10s", url],
                               kase.args[:seconds] + 60)
      end
      tick = -> { progress("#{label} #{(now - t0).round}/#{kase.args[:seconds]}s") if @tty }
      gc_asked = 0 # the server's collections at each end of the window: asked here, read after the run (ask_gc)
      window = SteadyWindow.new(port.to_i, c, kase.args[:seconds]) do
        cpu = thread_cpu(server_pid)
        gc_asked += 1 if ask_gc(io)
        cpu
      end.watch(wrk_thread, t0, &tick)
      while wrk_thread.alive?
        tick.call
        wrk_thread.join(0.5)
      end
      return { "error" => "wrk failed" } unless wrk

      result = parse_wrk(wrk)
      wall = now - t0
      if window.requests.to_i.positive?
        # the steady part: every connection open, none being set up (bench/lib/steady_window.rb)
        result.merge!(cpu_split(window.before, window.after, window.seconds, server_pid, ruby_tids, window.requests))
        result.merge!(gc_per_request(*Array.new(gc_asked) { read_gc(io) }, window.requests)) if gc_asked == 2
        result["window_s"] = window.seconds.round(2)
        result["window_requests"] = window.requests
        result["window_opened_s"] = window.opened_s.round(2)
      else
        result.merge!(cpu_split(cpu0, thread_cpu(server_pid), wall, server_pid, ruby_tids, result["requests"]))
        @notes << "#{label}: no steady window (#{which('ss') ? "wrk did not hold all #{c} connections by halfway" : 'no ss'}): " \
                  "the server's CPU per request is over the whole run, the connections' setup included"
      end
      result["wrk_cpu_pct"] = (wrk_cpu / wall * 100).round(1) if wrk_cpu && wall.positive?
      if result["wrk_cpu_pct"].to_f >= WRK_BOUND_PCT
        @notes << "#{label}: wrk used #{result['wrk_cpu_pct']}% of a CPU, so it set the rate; its req/s measure " \
                  "the load generator (the server's CPU per request does not depend on it)"
      end
      check_connections(result, wrk, window.open || [], c, label)
      { "contender" => contender, "result" => result, "versions" => { "ruby" => ruby_version } }
    ensure
      if io
        begin
          io.close_write
        rescue IOError
          nil
        end
        wait_or_kill(pid, 5) if pid
        io.close rescue nil
      end
    end

    # How long the server may take to close the warm-up's connections.
    DRAIN_S = 30

    # After the warm-up: waits until the server has closed every connection of
    # the warm-up's wrk, so that the measured run's CPU holds none of their
    # closing (10,000 of them at the largest count).
    def drain(port, label)
      left = TcpCensus.drain(port, DRAIN_S)
      @notes << "#{label}: #{left} connections of the warm-up still open #{DRAIN_S} s after it ended" if left.positive?
    end

    # wrk's errors and the connections it held, in the result and, where
    # something went wrong, in the run's notes: wrk itself prints them in a line
    # the figures would not show, and says nothing about connections it never opened.
    def check_connections(result, out, open, connections, label)
      result["errors"] = result["socket_errors"].to_i + result["non_2xx"].to_i
      result["connections_open"] = open.min
      result["connections_open_counted"] = open
      if result["errors"].positive?
        detail = [out[/^\s*Socket errors:.*$/]&.strip, ("non-2xx answers #{result['non_2xx']}" if result["non_2xx"].to_i.positive?)]
        @notes << "#{label}: wrk reported #{result['errors']} errors (#{detail.compact.join('; ')})"
      end
      return unless open.min && open.min < connections

      @notes << "#{label}: wrk was asked for #{connections} connections; the kernel held #{open.min} of them open at the " \
                "server at the fewest (counted when all should have been open and again near the run's end)"
    end

    # CPU time (ns) of each thread of the server: schedstat's run time, or
    # utime + stime from stat (clock ticks) where schedstat is missing.
    def thread_cpu(pid)
      return {} unless pid

      Dir.children("/proc/#{pid}/task").to_h do |tid|
        dir = "/proc/#{pid}/task/#{tid}"
        ns = begin
          File.read("#{dir}/schedstat").split[0].to_i
        rescue SystemCallError
          fields = File.read("#{dir}/stat").sub(/\A.*\) /m, "").split
          (fields[11].to_i + fields[12].to_i) * 10_000_000
        end
        [tid, ns]
      end
    rescue SystemCallError
      {}
    end

    # The server's CPU over the wrk run, split into its main Ruby thread (the
    # event loop), Ruby's other threads (those alive before the scheduler
    # started) and the rest: the Go runtime's threads.
    def cpu_split(before, after, wall, pid, ruby_tids, requests)
      return {} if after.empty? || wall <= 0

      ruby = ruby_tids.to_s.split(",")
      delta = after.to_h { |tid, ns| [tid, ns - before.fetch(tid, 0)] }
      main = delta.fetch(pid.to_s, 0)
      others = delta.select { |tid, _| ruby.include?(tid) && tid != pid.to_s }.values.sum
      go = delta.reject { |tid, _| ruby.include?(tid) || tid == pid.to_s }.values.sum
      pct = ->(ns) { (ns / 1e9 / wall * 100).round(2) }
      per_request = ->(ns) { requests.to_i.positive? ? (ns / 1e3 / requests).round(3) : nil }
      { "cpu_main_pct" => pct.call(main), "cpu_ruby_other_pct" => pct.call(others), "cpu_go_pct" => pct.call(go),
        "go_threads" => delta.size - ruby.size,
        "go_us_per_request" => per_request.call(go),
        # all of the server's threads: what a request costs, whoever set the rate
        "cpu_us_per_request" => per_request.call(main + others + go) }
    end

    # Asks the HTTP server for its collections so far (bench/http_hello.rb's
    # "gc" line) without waiting for the answer: its thread needs Ruby's lock,
    # which a busy loop may hold for a whole time slice (100 ms), and the
    # window's CPU and request counts are read right beside this. So an
    # answer may count the collections of up to a slice more than the window
    # holds, at either end: the rows are a rate to set beside the CPU, not
    # an exact count. false when the server's stdin is gone.
    def ask_gc(io)
      io.write("gc\n")
      io.flush
      true
    rescue IOError, SystemCallError
      false
    end

    # The next answer to ask_gc: { minor:, major:, ms: (nil where Ruby keeps no GC time) }, or nil.
    def read_gc(io)
      line = IO.select([io], nil, nil, 5) && io.gets
      _, minor, major, ms = line.to_s.split
      return nil unless line.to_s.start_with?("GC ")

      { minor: Integer(minor), major: Integer(major), ms: ms == "-" ? nil : Float(ms) }
    rescue IOError, SystemCallError, ArgumentError
      nil
    end

    # Ruby's collections per 1,000 requests between two read_gc answers, and
    # their milliseconds per 1,000 requests where Ruby keeps GC time. With
    # thousands of fibers parked each minor collection marks every one of
    # them again, so how often a contender's process collects (Ruby sizes
    # its heap by what the process keeps alive) weighs on the CPU per request
    # beside what the scheduler itself does (docs/benchmarks.md).
    def gc_per_request(before, after, requests)
      return {} unless before && after && requests.to_i.positive?

      count = ->(g) { g[:minor] + g[:major] }
      out = { "gc_per_1k_requests" => ((count.call(after) - count.call(before)) * 1000.0 / requests).round(3) }
      out["gc_ms_per_1k_requests"] = ((after[:ms] - before[:ms]) * 1000.0 / requests).round(2) if after[:ms] && before[:ms]
      out
    end

    def parse_wrk(out) = WrkOutput.parse(out)

    def run_all(contenders, kases, references = [])
      @raw = Hash.new { |h, k| h[k] = Hash.new { |h2, k2| h2[k2] = [] } }
      scaling = scaling_contenders(contenders)
      for_case = lambda do |kase|
        list = kase.only == :scaling ? scaling : contenders
        REFERENCE_CASES.include?(kase.id) ? list + references : list
      end
      total = kases.sum { |k| for_case.call(k).size } * @runs
      step = 0
      kases.each do |kase|
        @runs.times do |run|
          # Alternate: every run starts with a different contender.
          order = for_case.call(kase).rotate(run)
          order.each do |contender|
            step += 1
            label = "[#{step}/#{total}] #{kase.id} #{contender} run #{run + 1}/#{@runs}"
            progress(label)
            result = kase.kind == :http ? run_http(kase, contender, label) : run_workload(kase, contender, label)
            if result["error"]
              progress("#{label}: FAILED #{result['error']}", final: true)
              @notes << "#{kase.id} #{contender} run #{run + 1} failed: #{result['error']}"
            end
            @raw[kase.id][contender] << result
            @load << File.read("/proc/loadavg").split[0].to_f rescue nil
          end
        end
      end
      progress("done: #{total} runs", final: true)
    end
  end
end
