# frozen_string_literal: true

# Runs the whole benchmark suite and regenerates bench/README.md, bench/plot.svg
# and bench/results/*.json. Started by `rake bench` or `bin/bench`.
#
# Environment:
#   BENCH_RUNS=N         alternating runs per figure; the median is reported (default 3; quick 1)
#   BENCH_QUICK=1        short version (~2 minutes): shorter runs, fewer timers/fibers
#   BENCH_CONTENDERS=a,b override the contenders. A contender is NAME[+VAR=VALUE...][@RUBY]:
#                        NAME is farce-BACKEND, farce-ruby, async or threads; @RUBY picks the Ruby
#                        (3.3 and 3.4 run in the sid chroot; default: the host's, async: 3.3);
#                        +VAR=VALUE sets an environment variable (farce-epoll+GOMAXPROCS=2@3.3;
#                        farce-epoll+FARCE_STALL_MS=100@3.3 = with stall detection on).
#                        Async on Ruby X is the reference of every contender on Ruby X.
#   BENCH_REFERENCES=0   skip the reference rows (C epoll ping-pong, Ruby floor)
#   BENCH_EXTRA=1        also poll, GOMAXPROCS=1 and threads (on the headline Ruby)
#   BENCH_RUBIES=v=path  more Rubies by path (comma-separated; default 4.0=/opt/rubies/4.0/bin/ruby when
#                        it exists): farce on each (with YJIT too where it has YJIT), its Ruby floor,
#                        threads, and Async on farce's selector when Debian's pure-Ruby Async loads there
#   BENCH_YJIT=0         no YJIT rows (default: a YJIT twin of farce-epoll and of the Ruby floor on
#                        every Ruby whose `ruby --yjit` has YJIT)
#   BENCH_ONLY=x,y       only these cases (ids in the table: pp1, ppsock1, pp100, http64, http1000, scale0,
#                        scale10k, timers, spawnburst, acceptburst, queue, xthread, memfiber, memio)
#   BENCH_SID_RUN=path   chroot runner (default .ci/sid-run; .ci/sid-setup makes the chroot)
#   BENCH_NO_README=1    keep bench/README.md and bench/plot.svg (write only bench/results/)
require "json"
require "rbconfig"
require "fileutils"
require "time"
require_relative "lib/wrk_time"

module Bench
  class Runner
    ROOT = File.expand_path("..", __dir__)
    BENCH = File.join(ROOT, "bench")
    RESULTS = File.join(BENCH, "results")
    RUBY_ABI = RUBY_VERSION[/\A\d+\.\d+/]
    SID_RUBIES = %w[3.3 3.4].freeze
    # Cases that also run the reference programs (the kernel's limit, the Ruby floor).
    REFERENCE_CASES = %w[pp1 ppsock1 pp100].freeze
    # Turns YJIT on in a contender (+RUBY_YJIT_ENABLE=1): every Ruby with YJIT reads it.
    YJIT = "RUBY_YJIT_ENABLE=1"
    DEFAULT_RUBIES = { "4.0" => "/opt/rubies/4.0/bin/ruby" }.freeze
    C_PINGPONG = File.join(RESULTS, "pingpong_epoll")

    Case = Struct.new(:id, :title, :kind, :args, :expect_s, keyword_init: true)
    Row = Struct.new(:id, :label, :unit, :better, :plot, :value, keyword_init: true)

    def initialize
      @quick = ENV["BENCH_QUICK"] == "1"
      @runs = Integer(ENV["BENCH_RUNS"] || (@quick ? 1 : 3))
      raise ArgumentError, "BENCH_RUNS must be >= 1" if @runs < 1

      @sid_run = ENV["BENCH_SID_RUN"] || File.join(ROOT, ".ci", "sid-run")
      @tty = $stderr.tty?
      @started = now
      @notes = []
      @load = []
      @restore = []
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # ---------------------------------------------------------------- setup

    def ensure_tools
      missing = { "wrk" => "wrk", "gnuplot" => "gnuplot-nox" }.reject { |bin, _| which(bin) }
      return if missing.empty?

      if Process.uid.zero? && which("apt-get")
        pkgs = missing.values
        warn "bench: installing #{pkgs.join(' ')} with apt-get"
        system("apt-get", "install", "-y", *pkgs) ||
          (system("apt-get", "update") && system("apt-get", "install", "-y", *pkgs))
      end
      abort "bench: wrk is required (apt-get install -y wrk)" unless which("wrk")
      warn "bench: gnuplot not found; the plot will not be regenerated" unless which("gnuplot")
    end

    def which(bin)
      ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, bin) }.find { |p| File.executable?(p) }
    end

    def sid?
      File.executable?(@sid_run)
    end

    def ensure_built
      return if File.exist?(File.join(ROOT, "lib", "farce", RUBY_ABI, "farce_shim.so"))

      warn "bench: farce is not built for Ruby #{RUBY_ABI}; running rake compile"
      Dir.chdir(ROOT) { system(RbConfig.ruby, "-S", "rake", "compile") } || abort("bench: rake compile failed")
    end

    PROBE = <<~'RUBY'
      $LOAD_PATH.unshift(File.join(Dir.pwd, "lib"))
      require "farce"
      (Farce.backends - [:auto]).each do |b|
        begin
          s = Farce::Scheduler.new(backend: b)
          s.close
          puts "ok #{b}"
        rescue StandardError, NotImplementedError => e
          puts "no #{b} #{e.class}: #{e.message.lines.first&.strip}"
        end
      end
    RUBY

    # NAME[+VAR=VALUE...][@RUBY] => [name, env, ruby version]
    def parse_contender(contender)
      base, ver = contender.split("@", 2)
      name, *settings = base.split("+")
      env = settings.to_h { |kv| kv.split("=", 2) }
      [name, env, ver || (name == "async" ? "3.3" : RUBY_ABI)]
    end

    def ruby_of(contender)
      parse_contender(contender)[2]
    end

    # The command that runs `ruby` of the given version (the host's, or one in the sid chroot).
    def ruby_command(ver)
      return [RbConfig.ruby] if ver == RUBY_ABI
      return [other_rubies[ver]] if other_rubies[ver]

      ["env", "SID_RUBY=#{ver}", @sid_run, "ruby"]
    end

    # Rubies run by path, outside the chroot (BENCH_RUBIES): version => ruby.
    def other_rubies
      @other_rubies ||= begin
        spec = ENV["BENCH_RUBIES"]
        pairs = spec ? spec.split(",").map { |kv| kv.strip.split("=", 2) } : DEFAULT_RUBIES.to_a
        pairs.select { |ver, path| ver && path && File.executable?(path) && !SID_RUBIES.include?(ver) }.to_h
      end
    end

    # Whether `ruby --yjit` of that version has YJIT (Debian's 3.3/3.4 do not).
    def yjit?(ver)
      return false if ENV["BENCH_YJIT"] == "0"

      @yjit ||= {}
      @yjit.fetch(ver) do
        @yjit[ver] = capture([*ruby_command(ver), "--yjit", "-e", "print RubyVM::YJIT.enabled?"], 120) == "true"
      end
    end

    # Debian's pure-Ruby Async (from the sid chroot) as a load path for a
    # Ruby outside the chroot, when it loads there on farce's selector.
    def async_path(ver)
      @async_path ||= {}
      @async_path.fetch(ver) do
        root = ENV.fetch("SID_ROOT", "/opt/rubies/sid")
        dirs = Dir[File.join(root, "usr/share/rubygems-integration/all/gems/*/lib")] +
               Dir[File.join(root, "usr/lib/x86_64-linux-gnu/rubygems-integration/*/gems/io-event-*/lib")].last(1)
        probe = 'require "farce/io_event"; ENV["IO_EVENT_SELECTOR"] = "Farce"; require "async"; ' \
                'print Sync { IO::Event::Selector.default.name }'
        out = dirs.empty? ? nil : capture(["env", "RUBYLIB=#{dirs.join(':')}", *ruby_command(ver), "-Ilib", "-e", probe], 120)
        @async_path[ver] = out.to_s.include?("Farce") ? dirs.join(":") : nil
      end
    end

    def farce_built?(ver)
      File.exist?(File.join(ROOT, "lib", "farce", ver, "farce_shim.so"))
    end

    def async_on?(ver)
      sid? && capture([*ruby_command(ver), "-e", 'require "async"; print Async::VERSION'], 120).to_s.match?(/\A\d/)
    end

    # The same-Ruby headline first (farce and Async on 3.3, then 3.4), then the
    # extra rows: farce on the host's Ruby, farce without its Go scheduler
    # tick, farce with stall detection on, the pure-Ruby core; with BENCH_EXTRA=1 more (they add
    # ~10 minutes to a full run).
    def discover_contenders
      if ENV["BENCH_CONTENDERS"]
        return ENV["BENCH_CONTENDERS"].split(",").map(&:strip).reject(&:empty?)
      end

      backends = []
      out = capture([RbConfig.ruby, "-e", PROBE], 60)
      out.to_s.each_line do |line|
        status, name, reason = line.split(" ", 3)
        if status == "ok"
          backends << name
        elsif status == "no"
          @notes << "farce backend :#{name} skipped (unavailable here: #{reason.strip})"
        end
      end
      @notes << "farce could not be loaded; no farce contender" if backends.empty?
      list = []
      rubies = sid? ? SID_RUBIES.select { |v| farce_built?(v) } : []
      (SID_RUBIES - rubies).each do |v|
        @notes << "farce is not built for Ruby #{v} (SID_RUBY=#{v} .ci/sid-run rake compile): no farce@#{v}"
      end
      SID_RUBIES.each do |v|
        list << "farce-epoll@#{v}" if rubies.include?(v) && backends.include?("epoll")
        if async_on?(v)
          list << "async@#{v}"
        else
          @notes << "Async on Ruby #{v} unavailable (#{@sid_run} or the async gem missing): no ratios on #{v}"
        end
      end
      list << "farce-epoll@#{RUBY_ABI}" if backends.include?("epoll")
      main = rubies.first || RUBY_ABI
      # io_uring beside epoll on the headline Ruby (and what :auto picks)
      list << "farce-io_uring@#{main}" if backends.include?("io_uring")
      # Rubies outside the chroot (BENCH_RUBIES): farce against its Ruby floor and threads
      other_rubies.each_key do |v|
        unless farce_built?(v)
          @notes << "farce is not built for Ruby #{v} (build it with that Ruby's rake compile): no farce@#{v}"
          next
        end
        list << "farce-epoll@#{v}" if backends.include?("epoll")
        list << "farce-io_uring@#{v}" if backends.include?("io_uring")
        list << "threads@#{v}"
        if async_path(v)
          list << "async-farce@#{v}"
        else
          @notes << "Async on Ruby #{v}: Debian's pure-Ruby Async did not load there on farce's selector: no async-farce@#{v}"
        end
      end
      # YJIT twins on every Ruby whose `ruby --yjit` has it
      list.grep(/\Afarce-epoll@/).each do |c|
        v = ruby_of(c)
        yjit?(v) ? list << "farce-epoll+#{YJIT}@#{v}" : @notes << "Ruby #{v} has no YJIT: no YJIT row for it"
      end
      # farce before its Go scheduler tick (ext/farce/core/sched_tick.go), in the same run
      list << "farce-epoll+FARCE_SCHED_TICK=0@#{main}" if backends.include?("epoll")
      # what stall detection (issue 16: watchdog, turn stamps) costs, in the same run
      list << "farce-epoll+FARCE_STALL_MS=100@#{main}" if backends.include?("epoll")
      # what the pure-Ruby core (the fallback without Go, issue 19) costs
      list << "farce-ruby@#{main}"
      # BENCH_EXTRA=1: the other backends, GOMAXPROCS=1, threads
      if ENV["BENCH_EXTRA"] == "1"
        list << "farce-poll@#{main}" if backends.include?("poll")
        list << "farce-epoll+GOMAXPROCS=1@#{main}" if backends.include?("epoll")
        list << "threads@#{main}"
      end
      list
    end

    # The reference programs of the ping-pong cases: the C epoll program
    # (built here with gcc) and the Ruby floor on every Ruby a contender uses.
    def discover_references(contenders)
      return [] if ENV["BENCH_REFERENCES"] == "0"

      refs = []
      if which("gcc")
        FileUtils.mkdir_p(RESULTS)
        ok = system("gcc", "-O2", "-o", C_PINGPONG, File.join(BENCH, "pingpong_epoll.c"))
        ok ? refs << "c-epoll" : @notes << "gcc failed to build bench/pingpong_epoll.c: no C reference row"
      else
        @notes << "gcc not found: no C reference row"
      end
      refs + contenders.map { |c| floor_of(c) }.uniq
    end

    # The Ruby floor a contender is measured against: same Ruby, YJIT the same.
    def floor_of(contender)
      _, env, ver = parse_contender(contender)
      env["RUBY_YJIT_ENABLE"] == "1" ? "ruby-floor+#{YJIT}@#{ver}" : "ruby-floor@#{ver}"
    end

    def reference?(contender)
      contender == "c-epoll" || contender.start_with?("ruby-floor")
    end

    def capture(cmd, timeout)
      r, w = IO.pipe
      pid = Process.spawn(*cmd, out: w, err: File::NULL, in: File::NULL, pgroup: true, chdir: ROOT)
      w.close
      reader = Thread.new { r.read }
      status = wait_or_kill(pid, timeout)
      out = reader.value
      r.close
      status&.success? ? out : nil
    end

    # Waits for pid until timeout seconds have passed, then kills its process group.
    def wait_or_kill(pid, timeout, &tick)
      deadline = now + timeout
      loop do
        _, status = Process.waitpid2(pid, Process::WNOHANG)
        return status if status

        if now > deadline
          Process.kill(:KILL, -pid) rescue nil
          Process.waitpid2(pid) rescue nil
          return nil
        end
        tick&.call
        sleep 0.05
      end
    end

    # ---------------------------------------------------------------- cases

    # Every live fiber's stack costs Ruby two memory mappings (stack + guard
    # page), so vm.max_map_count (65530 by default) caps live fibers near 32k:
    # beyond it Fiber#resume raises "can't set a guard page". Returns the
    # timer count that fits, with a note when that is below the wanted count.
    def timer_count(wanted)
      maps = File.read("/proc/sys/vm/max_map_count").to_i rescue 0
      return wanted if maps.zero? || maps / 2 - 4000 >= wanted

      if raise_max_map_count(wanted * 2 + 16_000)
        @notes << "timers: vm.max_map_count raised from #{maps} to #{wanted * 2 + 16_000} for this run " \
                  "(Ruby maps two regions per live fiber stack), restored afterwards"
        return wanted
      end

      fit = (maps / 2 - 4000) / 1000 * 1000
      @notes << "timers: #{fit} instead of #{wanted} sleeping fibers: vm.max_map_count is #{maps} and Ruby " \
                "maps two regions per live fiber stack (raise it, e.g. sysctl vm.max_map_count=262144, to run #{wanted})"
      fit
    end

    # Raises vm.max_map_count for this run when the machine lets us (root);
    # main puts the old value back.
    def raise_max_map_count(count)
      path = "/proc/sys/vm/max_map_count"
      old = File.read(path).to_i
      File.write(path, count.to_s)
      @restore << -> { File.write(path, old.to_s) }
      true
    rescue SystemCallError, IOError
      false
    end

    def cases
      q = @quick
      d = q ? 0.5 : 2.0
      wrk_s = q ? 2 : 5
      list = [
        Case.new(id: "pp1", title: "pipe ping-pong, 1 pair", kind: :workload,
                 args: ["pingpong", "pairs=1", "seconds=#{d}"], expect_s: d + 1),
        Case.new(id: "ppsock1", title: "socketpair ping-pong, 1 pair", kind: :workload,
                 args: ["pingpong", "pairs=1", "seconds=#{d}", "over=socket"], expect_s: d + 1),
        Case.new(id: "pp100", title: "pipe ping-pong, 100 pairs", kind: :workload,
                 args: ["pingpong", "pairs=100", "seconds=#{d}"], expect_s: d + 1),
        Case.new(id: "http64", title: "HTTP hello, wrk 64 connections", kind: :http,
                 args: { connections: 64, seconds: wrk_s, warmup: q ? 0 : 1 }, expect_s: wrk_s + 4),
        Case.new(id: "http1000", title: "HTTP hello, wrk 1,000 connections", kind: :http,
                 args: { connections: 1000, seconds: wrk_s, warmup: q ? 0 : 1 }, expect_s: wrk_s + 5),
        Case.new(id: "scale0", title: "ping-pong, 0 idle connections", kind: :workload,
                 args: ["scale", "idle=0", "seconds=#{d}"], expect_s: d + 1),
        Case.new(id: "scale10k", title: "ping-pong, 10,000 idle connections", kind: :workload,
                 args: ["scale", "idle=10000", "seconds=#{d}"], expect_s: d + 4),
        Case.new(id: "timers", title: "timers", kind: :workload,
                 args: ["timers", "count=#{q ? 20_000 : 100_000}", "max_ms=1000"], expect_s: q ? 5 : 30),
        Case.new(id: "queue", title: "Queue hand-off", kind: :workload,
                 args: ["queue", "seconds=#{d}"], expect_s: d + 1),
        Case.new(id: "xthread", title: "cross-thread wake-up", kind: :workload,
                 args: ["xthread", "seconds=#{d}"], expect_s: d + 1),
        Case.new(id: "spawnburst", title: "spawn burst: 2,000 sleeps of 1-100 ms spawned at once", kind: :workload,
                 args: ["spawn_burst", "count=2000", "max_ms=100"], expect_s: 3),
        Case.new(id: "acceptburst", title: "accept burst: 1,500 connections in the backlog, 1 ms ticker",
                 kind: :workload, args: ["accept_burst", "count=1500"], expect_s: 10),
        Case.new(id: "memfiber", title: "memory per parked task", kind: :workload,
                 args: ["memory", "count=#{q ? 3000 : 8000}", "what=fiber"], expect_s: 5),
        Case.new(id: "memio", title: "memory per task parked on a descriptor", kind: :workload,
                 args: ["memory", "count=#{q ? 3000 : 8000}", "what=io"], expect_s: 5)
      ]
      if ENV["BENCH_ONLY"]
        only = ENV["BENCH_ONLY"].split(",").map(&:strip)
        list.select! { |c| only.include?(c.id) }
      end
      # Only a run that has the timers case checks (and may raise) vm.max_map_count.
      list.each { |c| c.args[1] = "count=#{timer_count(100_000)}" if c.id == "timers" && !q }
      list
    end

    def command(contender, script, *args)
      name, env, ver = parse_contender(contender)
      [*env_prefix(name, env, ver), *ruby_command(ver), File.join(BENCH, script), name, *args.map(&:to_s)]
    end

    # `env VAR=VALUE ...` for a contender's settings (and Async's load path
    # where it comes from the chroot), or nothing.
    def env_prefix(name, env, ver)
      env = env.merge("RUBYLIB" => async_path(ver)) if name == "async-farce" && other_rubies[ver] && async_path(ver)
      env.empty? ? [] : ["env", *env.map { |k, v| "#{k}=#{v}" }]
    end

    # A workload case as a command: a contender runs workloads.rb; the
    # references run their own program with the case's pairs and seconds.
    def workload_command(kase, contender)
      return command(contender, "workloads.rb", *kase.args) unless reference?(contender)

      params = kase.args.drop(1).to_h { |kv| kv.split("=", 2) }
      over = params["over"] || "pipe"
      if contender == "c-epoll"
        [C_PINGPONG, params["pairs"], params["seconds"], over]
      else
        name, env, ver = parse_contender(contender)
        [*env_prefix(name, env, ver), *ruby_command(ver), File.join(BENCH, "ruby_floor.rb"), params["pairs"],
         params["seconds"], over]
      end
    end

    # ---------------------------------------------------------------- running

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

    def run_http(kase, contender, label)
      cmd = command(contender, "http_hello.rb", "0")
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
        capture(["wrk", "-t1", "-c#{c}", "-d#{kase.args[:warmup]}s", "--timeout", "10s", url], 60)
      end
      cpu0 = thread_cpu(server_pid)
      t0 = now
      wrk = nil
      wrk_thread = Thread.new do
        wrk = capture(["wrk", "-t1", "-c#{c}", "-d#{kase.args[:seconds]}s", "--latency", "--timeout", "10s", url],
                      kase.args[:seconds] + 60)
      end
      while wrk_thread.alive?
        progress("#{label} #{(now - t0).round}/#{kase.args[:seconds]}s") if @tty
        wrk_thread.join(0.5)
      end
      return { "error" => "wrk failed" } unless wrk

      result = parse_wrk(wrk)
      result.merge!(cpu_split(cpu0, thread_cpu(server_pid), now - t0, server_pid, ruby_tids, result["requests"]))
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
      { "cpu_main_pct" => pct.call(main), "cpu_ruby_other_pct" => pct.call(others), "cpu_go_pct" => pct.call(go),
        "go_threads" => delta.size - ruby.size,
        "go_us_per_request" => requests.to_i.positive? ? (go / 1e3 / requests).round(3) : nil }
    end

    def parse_wrk(out)
      res = {}
      res["requests_per_second"] = out[/^Requests\/sec:\s+([\d.]+)/, 1].to_f.round
      if (m = out.match(/^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)/))
        res["latency_avg_ms"] = WrkTime.to_ms(m[1]).round(3)
        res["latency_max_ms"] = WrkTime.to_ms(m[3]).round(3)
      end
      { "50" => "latency_p50_ms", "99" => "latency_p99_ms" }.each do |pct, key|
        v = out[/^\s+#{pct}%\s+(\S+)/, 1]
        res[key] = WrkTime.to_ms(v).round(3) if v
      end
      if (m = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/))
        res["socket_errors"] = m.captures.map(&:to_i).sum
      end
      res["non_2xx"] = out[/Non-2xx or 3xx responses:\s+(\d+)/, 1].to_i
      res["requests"] = out[/(\d+) requests in/, 1].to_i
      res
    end

    def run_all(contenders, kases, references = [])
      @raw = Hash.new { |h, k| h[k] = Hash.new { |h2, k2| h2[k2] = [] } }
      for_case = ->(kase) { REFERENCE_CASES.include?(kase.id) ? contenders + references : contenders }
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

    # ---------------------------------------------------------------- summary

    def rows
      [
        Row.new(id: "pp1", label: "ping-pong, 1 pair", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("pp1", "round_trips_per_second") }),
        Row.new(id: "ppsock1", label: "ping-pong over a socketpair, 1 pair", unit: "round trips/s", better: :higher,
                plot: true, value: ->(r) { r.dig("ppsock1", "round_trips_per_second") }),
        Row.new(id: "pp100", label: "ping-pong, 100 pairs", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("pp100", "round_trips_per_second") }),
        Row.new(id: "http64", label: "HTTP, 64 conns", unit: "req/s", better: :higher, plot: true,
                value: ->(r) { r.dig("http64", "requests_per_second") }),
        Row.new(id: "http64p50", label: "HTTP, 64 conns, p50", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http64", "latency_p50_ms") }),
        Row.new(id: "http64p99", label: "HTTP, 64 conns, p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http64", "latency_p99_ms") }),
        Row.new(id: "http64max", label: "HTTP, 64 conns, max", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http64", "latency_max_ms") }),
        Row.new(id: "http1000", label: "HTTP, 1,000 conns", unit: "req/s", better: :higher, plot: true,
                value: ->(r) { r.dig("http1000", "requests_per_second") }),
        Row.new(id: "http1000p50", label: "HTTP, 1,000 conns, p50", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http1000", "latency_p50_ms") }),
        Row.new(id: "http1000p99", label: "HTTP, 1,000 conns, p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http1000", "latency_p99_ms") }),
        Row.new(id: "http1000max", label: "HTTP, 1,000 conns, max", unit: "ms", better: :lower,
                value: ->(r) { r.dig("http1000", "latency_max_ms") }),
        Row.new(id: "http64cpu", label: "HTTP, 64 conns: main Ruby thread's CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http64", "cpu_main_pct") }),
        Row.new(id: "http64go", label: "HTTP, 64 conns: Go threads' CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http64", "cpu_go_pct") }),
        Row.new(id: "http64gous", label: "HTTP, 64 conns: Go threads' CPU per request", unit: "µs", better: :lower,
                value: ->(r) { r.dig("http64", "go_us_per_request") }),
        Row.new(id: "http1000cpu", label: "HTTP, 1,000 conns: main Ruby thread's CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http1000", "cpu_main_pct") }),
        Row.new(id: "http1000go", label: "HTTP, 1,000 conns: Go threads' CPU", unit: "% CPU", better: :lower,
                value: ->(r) { r.dig("http1000", "cpu_go_pct") }),
        Row.new(id: "http1000gous", label: "HTTP, 1,000 conns: Go threads' CPU per request", unit: "µs",
                better: :lower, value: ->(r) { r.dig("http1000", "go_us_per_request") }),
        Row.new(id: "scale0", label: "ping-pong, 0 idle conns", unit: "round trips/s", better: :higher,
                value: ->(r) { r.dig("scale0", "round_trips_per_second") }),
        Row.new(id: "scale10k", label: "ping-pong, 10,000 idle conns", unit: "round trips/s", better: :higher,
                plot: true, value: ->(r) { r.dig("scale10k", "round_trips_per_second") }),
        Row.new(id: "scaleratio", label: "10,000 idle / 0 idle", unit: "ratio", better: :higher,
                value: lambda { |r|
                  a = r.dig("scale10k", "round_trips_per_second")
                  b = r.dig("scale0", "round_trips_per_second")
                  a && b&.positive? ? (a.to_f / b).round(3) : nil
                }),
        Row.new(id: "scale10kgc", label: "10,000 idle: minor GCs per 1,000 round trips", unit: "ratio", better: :lower,
                value: ->(r) { r.dig("scale10k", "gc_minor_per_1k_trips") }),
        Row.new(id: "scale10kgcms", label: "10,000 idle: ms per GC (where the Ruby keeps GC time)", unit: "ms",
                better: :lower, value: ->(r) { r.dig("scale10k", "gc_ms_per_gc") }),
        Row.new(id: "timers", label: "timers, random 1–1000 ms sleeps", unit: "timers/CPU-s", better: :higher, plot: true,
                value: ->(r) { r.dig("timers", "timers_per_cpu_second") }),
        Row.new(id: "timersp99", label: "timer lateness p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("timers", "lateness_p99_ms") }),
        Row.new(id: "timersalive", label: "timers: most sleepers parked at once", unit: "fibers", better: :lower,
                value: ->(r) { r.dig("timers", "peak_alive") }),
        Row.new(id: "timersgc", label: "timers: mean GC pause (where the Ruby keeps GC time)", unit: "ms",
                better: :lower, value: ->(r) { r.dig("timers", "gc_ms_mean") }),
        Row.new(id: "spawnp50", label: "spawn burst: timer lateness p50", unit: "ms", better: :lower,
                value: ->(r) { r.dig("spawnburst", "lateness_p50_ms") }),
        Row.new(id: "spawnp99", label: "spawn burst: timer lateness p99", unit: "ms", better: :lower,
                value: ->(r) { r.dig("spawnburst", "lateness_p99_ms") }),
        Row.new(id: "acceptgap", label: "accept burst: ticker's worst gap", unit: "ms", better: :lower,
                value: ->(r) { r.dig("acceptburst", "worst_gap_ms") }),
        Row.new(id: "accepttotal", label: "accept burst: total time", unit: "ms", better: :lower,
                value: ->(r) { (v = r.dig("acceptburst", "burst_s")) && (v * 1000).round(1) }),
        Row.new(id: "queue", label: "Queue hand-off", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("queue", "round_trips_per_second") }),
        Row.new(id: "xthread", label: "cross-thread wake-up", unit: "round trips/s", better: :higher, plot: true,
                value: ->(r) { r.dig("xthread", "round_trips_per_second") }),
        Row.new(id: "memfiber", label: "memory per parked task", unit: "KiB", better: :lower,
                value: ->(r) { (v = r.dig("memfiber", "bytes_per_task")) && (v / 1024.0).round(1) }),
        Row.new(id: "memfd", label: "memory per registered descriptor (noisy)", unit: "KiB", better: :lower,
                value: lambda { |r|
                  io = r.dig("memio", "bytes_per_task")
                  fb = r.dig("memfiber", "bytes_per_task")
                  io && fb ? ((io - fb) / 1024.0).round(2) : nil
                })
      ]
    end

    def median(values)
      v = values.compact.sort
      return nil if v.empty?

      v.size.odd? ? v[v.size / 2] : (v[v.size / 2 - 1] + v[v.size / 2]) / 2.0
    end

    # What a contender's ratios divide by: Async on the same Ruby (none for Async itself).
    def reference_of(contender, contenders)
      return nil if contender.start_with?("async")

      ref = "async@#{ruby_of(contender)}"
      ref if contenders.include?(ref)
    end

    # per_run[contender] = [{case_id => result hash}, ...] (index = run)
    def per_run(contenders)
      contenders.to_h do |c|
        [c, Array.new(@runs) { |i| @raw.to_h { |cid, by_c| [cid, by_c[c]&.[](i)&.dig("result")] } }]
      end
    end

    def summarize(contenders)
      per_run = per_run(contenders)
      rows.filter_map do |row|
        cells = contenders.to_h do |c|
          values = per_run[c].map { |run| row.value.call(run) }
          ref = reference_of(c, contenders)
          ratios = if ref
                     values.each_with_index.map do |v, i|
                       a = row.value.call(per_run[ref][i])
                       v && a && a.to_f.positive? && v >= 0 ? v.to_f / a : nil
                     end
                   else
                     []
                   end
          [c, { "median" => median(values), "ratio" => median(ratios), "runs" => values }]
        end
        next if cells.values.all? { |cell| cell["median"].nil? }

        { "id" => row.id, "label" => row.label, "unit" => row.unit, "better" => row.better.to_s,
          "plot" => row.plot ? true : false, "cells" => cells }
      end
    end

    # ---------------------------------------------------------------- output

    def machine
      cpu = File.read("/proc/cpuinfo")[/^model name\s*:\s*(.+)$/, 1] rescue nil
      go = `go version 2>/dev/null`.strip
      {
        "nproc" => `nproc`.strip.to_i, "cpu" => cpu || "unknown", "kernel" => `uname -sr`.strip,
        "memory_gib" => ((File.read("/proc/meminfo")[/MemTotal:\s+(\d+)/, 1].to_i / 1048576.0).round(1) rescue nil),
        "host_ruby" => RUBY_DESCRIPTION, "go" => go.empty? ? "not found" : go,
        "wrk" => `wrk -v 2>&1`[/wrk \S+/].to_s.sub("debian/", "")
      }
    end

    def fmt(value, unit)
      return "—" if value.nil?

      if %w[ms KiB ratio µs].include?(unit) || unit.start_with?("%")
        value >= 100 ? value.round.to_s : format("%.3g", value)
      else
        value.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
      end
    end

    def cell_text(cell, unit, contender)
      text = fmt(cell["median"], unit)
      text += format(" (%.2f×)", cell["ratio"]) if cell["ratio"] && !contender.start_with?("async")
      text
    end

    def versions_of(contender)
      @raw.each_value do |by_c|
        Array(by_c[contender]).each { |r| return r["versions"] if r && r["versions"] && r["versions"].size > 1 }
      end
      @raw.each_value { |by_c| Array(by_c[contender]).each { |r| return r["versions"] if r&.dig("versions") } }
      {}
    end

    def describe(contender)
      v = versions_of(contender)
      name, env, ver = parse_contender(contender)
      where = if ver == RUBY_ABI then ""
              elsif other_rubies[ver] then " (#{other_rubies[ver]})"
              else " (sid chroot via .ci/sid-run)"
              end
      ruby = "Ruby #{v['ruby'] || ver}#{env['RUBY_YJIT_ENABLE'] == '1' ? ' with YJIT' : ''}#{where}"
      env = env.reject { |k, _| k == "RUBY_YJIT_ENABLE" }
      settings = env.empty? ? "" : ", #{env.map { |k, val| "#{k}=#{val}" }.join(' ')}"
      case name
      when "farce-ruby"
        "farce #{v['farce']}, its pure-Ruby core (no Go), #{ruby}"
      when /\Afarce/
        "farce #{v['farce']} :#{v['backend'] || name.delete_prefix('farce-')} backend#{settings}, #{ruby}"
      when "async"
        "Async #{v['async']}, io-event #{v['io_event']} (#{v['selector']}), #{ruby}"
      when "async-farce"
        "Async #{v['async']} on farce's io-event selector (IO_EVENT_SELECTOR=Farce; Debian's pure-Ruby Async), #{ruby}"
      when "threads"
        "a Ruby Thread per task, #{ruby}"
      when "c-epoll"
        "C, no Ruby: `bench/pingpong_epoll.c` (one thread, epoll, non-blocking pipes or socketpairs), built with gcc -O2"
      when "ruby-floor"
        "plain fibers, `bench/ruby_floor.rb` (read_nonblock/write_nonblock, Fiber#transfer to the " \
          "fiber a write made runnable, IO.select only when all would block), #{ruby}"
      else
        contender
      end
    end

    def write_outputs(contenders, references, summary, info)
      FileUtils.mkdir_p(RESULTS)
      stamp = Time.now.utc.strftime("%Y%m%dT%H%M%SZ")
      data = { "generated_at" => Time.now.utc.iso8601, "quick" => @quick, "runs" => @runs, "machine" => info,
               "contenders" => contenders.to_h { |c| [c, describe(c)] },
               "references" => references.to_h { |c| [c, describe(c)] }, "summary" => summary,
               "raw" => @raw, "notes" => @notes, "load" => @load }
      json = JSON.pretty_generate(data)
      File.write(File.join(RESULTS, "results-#{stamp}.json"), json)
      File.write(File.join(RESULTS, "latest.json"), json)
      print_table(contenders, summary)
      puts limit_lines(contenders, references)
      return if ENV["BENCH_NO_README"] == "1"

      plotted = write_plot(contenders, summary)
      File.write(File.join(BENCH, "README.md"), readme(contenders, references, summary, info, plotted))
      warn "bench: wrote bench/README.md#{plotted ? ', bench/plot.svg' : ''} and bench/results/results-#{stamp}.json"
    end

    def table_lines(contenders, summary)
      lines = []
      lines << "| workload | unit | #{contenders.join(' | ')} |"
      lines << "| --- | --- |#{' ---: |' * contenders.size}"
      summary.each do |row|
        better = row["better"] == "higher" ? "↑" : "↓"
        cells = contenders.map { |c| cell_text(row["cells"][c], row["unit"], c) }
        lines << "| #{row['label']} | #{row['unit']} #{better} | #{cells.join(' | ')} |"
      end
      lines
    end

    # "How close to the limit": the ping-pong rates of the references and of
    # every contender, and each contender as a fraction of the Ruby floor on
    # its Ruby (median over runs of the same run's ratio).
    def limit_lines(contenders, references)
      return [] if references.empty?

      runs = per_run(contenders + references)
      rate = ->(c, id, i) { runs[c][i]&.dig(id, "round_trips_per_second") }
      ids = %w[pp1 ppsock1 pp100]
      lines = ["| | ping-pong, 1 pair (round trips/s) | socketpair, 1 pair | 100 pairs | fraction of the Ruby floor, " \
               "1 pair | socketpair | 100 pairs |",
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
      (references + contenders.grep_v(/\Athreads/)).each do |c|
        floor = floor_of(c)
        cells = ids.map { |id| fmt(median(Array.new(@runs) { |i| rate.call(c, id, i) }), "round trips/s") }
        fractions = ids.map do |id|
          next "—" if reference?(c) || !runs[floor]

          f = median(Array.new(@runs) { |i| (a = rate.call(c, id, i)) && (b = rate.call(floor, id, i)) && b.positive? ? a.to_f / b : nil })
          f ? format("%.2f", f) : "—"
        end
        next if cells.all?("—")

        lines << "| `#{c}` | #{cells.join(' | ')} | #{fractions.join(' | ')} |"
      end
      lines
    end

    def print_table(contenders, summary)
      puts
      puts table_lines(contenders, summary)
      puts
      @notes.each { |n| puts "note: #{n}" }
    end

    def write_plot(contenders, summary)
      series = contenders.select { |c| reference_of(c, contenders) }
      return false unless which("gnuplot") && !series.empty?

      plot_rows = summary.select { |r| r["plot"] }
      return false if plot_rows.empty?

      dat = File.join(RESULTS, "plot.dat")
      File.open(dat, "w") do |f|
        f.puts "workload #{series.map { |s| "\"#{s}\"" }.join(' ')}"
        plot_rows.each do |row|
          vals = series.map { |s| (r = row["cells"][s]["ratio"]) ? format("%.4f", r) : "NaN" }
          f.puts "\"#{row['label']}\" #{vals.join(' ')}"
        end
      end
      svg = File.join(BENCH, "plot.svg")
      script = <<~GP
        set terminal svg size 1000,520 dynamic font "sans,12" background "white" noenhanced
        set output "#{svg}"
        set title "throughput relative to Async on the same Ruby (=1) #{@quick ? '(BENCH_QUICK)' : ''}\\nmedian of #{@runs} run(s), higher is better, log scale, bars above 64x cut off"
        set style data histograms
        set style histogram clustered gap 1
        set style fill solid 0.85 border -1
        set boxwidth 0.9
        set logscale y 2
        set yrange [0.0078125:64]
        set ylabel "ratio to Async"
        set xtics rotate by -25 scale 0 font ",11"
        set grid ytics
        set key top left
        set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 dt 2 lc rgb "black"
        plot for [i=2:#{series.size + 1}] "#{dat}" using i:xtic(1) title columnheader(i)
      GP
      File.write(File.join(RESULTS, "plot.gp"), script)
      ok = system("gnuplot", File.join(RESULTS, "plot.gp"), err: File.join(RESULTS, "gnuplot.log"))
      warn "bench: gnuplot failed, see bench/results/gnuplot.log" unless ok
      ok
    end

    # The targets of issue 17, for farce's epoll backend against Async on the
    # same Ruby (3.3, 3.4), and the idle-connection target on every Ruby.
    def targets(contenders, summary)
      get = ->(id, c) { summary.find { |r| r["id"] == id }&.dig("cells", c) }
      out = []
      check = lambda do |desc, ok, detail|
        out << "- #{ok.nil? ? '?' : ok ? 'met' : 'MISSED'}: #{desc} — #{detail}"
      end
      ratio = ->(id, c) { get.call(id, c)&.dig("ratio") }
      contenders.grep(/\Afarce-epoll@/).each do |farce|
        ver = ruby_of(farce)
        if contenders.include?("async@#{ver}")
          %w[pp1 pp100].each do |id|
            r = ratio.call(id, farce)
            check.call("Ruby #{ver}: ping-pong ≥ 2.5× Async (#{id})", r && r >= 2.5, r ? format("%.2f×", r) : "no data")
          end
          %w[http64 http1000].each do |id|
            r = ratio.call(id, farce)
            max = get.call("#{id}max", farce)&.dig("median")
            ok = r && r >= 2
            ok &&= max && max < 50 if id == "http1000"
            detail = r ? format("%.2f× req/s, max latency %s ms", r, fmt(max, "ms")) : "no data"
            check.call("Ruby #{ver}: HTTP ≥ 2× Async req/s#{id == 'http1000' ? ', max latency < 50 ms' : ''} (#{id})",
                       ok, detail)
          end
          r = ratio.call("timersp99", farce)
          check.call("Ruby #{ver}: timer lateness p99 ≤ ½ of Async's", r && r <= 0.5,
                     r ? format("%.2f× Async's (%s ms)", r, fmt(get.call("timersp99", farce)&.dig("median"), "ms")) : "no data")
        end
        s = get.call("scaleratio", farce)&.dig("median")
        check.call("Ruby #{ver}: 10,000 idle connections ≥ 0.9 of the 0-idle rate", s && s >= 0.9,
                   s ? format("%.2f", s) : "no data")
      end
      out
    end

    def load_text
      return "not recorded" if @load.nil? || @load.empty?

      v = @load.compact.sort
      format("1-minute load average %.2f–%.2f (median %.2f) over the run, on %d CPUs", v.first, v.last,
             median(v), `nproc`.to_i)
    end

    def readme(contenders, references, summary, info, plotted, generated_at = nil)
      stamp = (generated_at ? Time.parse(generated_at) : Time.now).utc.strftime("%Y-%m-%d %H:%M UTC")
      cfg = @quick ? "BENCH_QUICK=1 (short runs: 0.5 s per rate, wrk 2 s, 20,000 timers)" :
                     "default (2 s per rate, wrk 1 s warm-up + 5 s, 100,000 timers)"
      <<~MD
        # farce benchmarks

        Generated by `rake bench` (or `bin/bench`) on #{stamp}; do not edit by hand, rerun
        instead (`ruby bench/runner.rb --render` redraws this file from `bench/results/latest.json`). Settings: #{cfg}; each figure is the median of #{@runs} alternating run(s)
        (`BENCH_RUNS`), and the ratio in parentheses is the median over runs of contender ÷ Async
        **on the same Ruby**, measured in the same run (contenders on a Ruby without Async, such as
        the host's, have no ratio). ↑ higher is better, ↓ lower is better.

        ## Machine

        | | |
        | --- | --- |
        | CPU | #{info['cpu']}, #{info['nproc']} CPUs (nproc), #{info['memory_gib']} GiB |
        | kernel | #{info['kernel']} |
        | host Ruby | #{info['host_ruby']} |
        | Go | #{info['go']} |
        | load generator | #{info['wrk']} (`-t1`, one thread, so the server keeps the other CPU) |
        | load | #{load_text} (the machine is shared; the contenders alternate, so load hits all of them alike) |

        Contenders (the workload code is the same file for all of them; `NAME@RUBY`, `+VAR=VALUE` is
        an environment setting):

        #{contenders.map { |c| "- `#{c}`: #{describe(c)}" }.join("\n")}

        Async on Ruby 3.4 runs io-event's pure-Ruby `Select` selector: sid's native io-event is built
        for Ruby 3.3 only, so on 3.4 Async falls back to it. Its 3.4 column is shown, but it is not
        Async at its best; the 3.3 columns are the fair headline.

        ## Results

        #{table_lines(contenders, summary).join("\n")}

        #{plotted ? "![farce and threads relative to Async on the same Ruby](plot.svg)\n" : ''}
        The GC rows of the 10,000-idle case say where its time goes: every minor GC marks every
        parked fiber (a fiber is not write-barrier protected, so old fibers are marked again each
        time), ~2 µs per fiber parked in `read`. farce allocates nothing per round trip; Ruby does
        (the result strings and an `IO::Buffer` per `read`/`write` hook call, 8 objects per round
        trip). Ruby 3.3 puts those buffers in its 80-byte size pool, which holds the idle
        connections' buffers and strings and which 3.3 does not grow, so it collects 2.5–10 times
        as often as 3.1 and 3.4 do (`RUBY_GC_HEAP_1_INIT_SLOTS=60000` brought farce on 3.3 from
        0.26 to ~0.75 of the 0-idle rate). How often 3.3 collects there depends on what else
        happens to sit in that pool, so the row swings between runs with no change to the scheduler: one
        full run gave 1.12 minor GCs per 1,000 round trips (37,000 round trips/s), this one 0.48
        (64,000), and in a controlled test starting the same workload by a relative instead of an
        absolute script path flipped it from 1.12 to 0.47. What farce controls is the cost per parked
        fiber in each collection: its own C frames below a parked fiber are under 700 bytes
        (`-fstack-usage`), and 9,000 fibers parked in `read` cost 13.7 ms per minor GC on 3.3,
        9.9 ms parked in `sleep`, against 4 ms for bare fibers parked in `Fiber.yield` with no
        scheduler: the rest is Ruby's frames for the hook call (each C-to-Ruby re-entry such as
        `each` with a block adds ~0.33 µs per fiber per GC).

        The timer rows depend on how many sleepers are parked at once (the "most sleepers parked at
        once" row), because every minor GC marks every parked fiber: a contender that spawns the
        100,000 faster has more of them alive together and longer GC pauses, which is what its
        lateness p99 is made of.

        The CPU rows split the HTTP server's CPU time over the wrk run by thread
        (`/proc/PID/task/*/schedstat`): the main Ruby thread runs the event loop; the Go threads are
        those that appeared when farce's core started (sysmon, idle Ms, GC workers). Async has none.

        ## How close to the limit

        Two references, measured in the same run as the contenders: `c-epoll`, the kernel's limit for
        this ping-pong with no Ruby at all, and `ruby-floor@RUBY`, the least any Ruby fiber scheduler
        can cost (no scheduler: the fibers switch straight to each other and poll only when every one
        would block). The last three columns give each contender as a fraction of the floor on its Ruby
        (with YJIT, of the floor with YJIT).
        With one pair the floor is a true floor. With 100 pairs it is not: it tries each read first and
        pays a failed `read` (EAGAIN) per wait, where farce learns the readiness of up to 256 waits
        from one `epoll_wait`, so a scheduler can beat it there.

        #{references.map { |c| "- `#{c}`: #{describe(c)}" }.join("\n")}

        #{limit_lines(contenders, references).join("\n")}

        ### Targets (issue 17), for farce's epoll backend against Async on the same Ruby

        #{targets(contenders, summary).join("\n")}
        #{@notes.empty? ? '' : "\n### Notes from this run\n\n#{@notes.map { |n| "- #{n}" }.join("\n")}\n"}
        ## The workloads

        All code is in this directory: `lib/harness.rb` is the only place that differs per contender
        (`Fiber.schedule` under a scheduler, or `Thread.new`, and how to wait for all of them);
        `workloads.rb` and `http_hello.rb` are shared. Everything runs on 127.0.0.1, and every loop
        is bounded by a deadline or a count; the driver (`runner.rb`) kills any run that overruns.

        1. **ping-pong**: pairs of tasks bounce one byte over two pipes (`IO#read(1)`/`IO#write`);
           round trips per second summed over pairs. The socketpair row does the same over two
           `UNIXSocket.pair`s, what servers read and write (farce reads pipes with `RWF_NOWAIT`,
           sockets with `MSG_DONTWAIT`, so that a descriptor switched to blocking never blocks the loop).
        2. **HTTP hello**: `http_hello.rb`, a plain `TCPServer` with one task per connection and
           hand-written HTTP/1.1 keep-alive parsing; `wrk --latency -t1 -cN` for the req/s and the
           p50/p99/max latencies. Async's server runs inside the sid chroot (`sid-run` shares the
           network namespace, so the host's wrk reaches it on 127.0.0.1).
        3. **scale**: 10,000 loopback TCP connections whose peers sit in a helper process
           (`lib/idle_peer.rb`), each with a task parked in `read`, plus one ping-pong pair; the row
           "10,000 idle / 0 idle" divides by the same pair's rate with no idle connections.
        4. **timers**: 100,000 tasks (fewer when `vm.max_map_count` forbids; see the notes) each `sleep` a random 1–1000 ms (fixed seed). Throughput is
           timers per CPU second of the whole process (all threads, so Go's too). Lateness is wake
           time minus due time, over the timers the spawning loop did not hold up: due after it
           finished, or woken while it still ran (a scheduler that lets the spawner hold the loop
           fires nothing while it spawns; the spawn-burst rows below count every timer). The count
           of timers measured is in the raw JSON (`lateness_counted`).
        5. **Queue hand-off**: two tasks ping-pong through two `Thread::Queue`s. **cross-thread
           wake-up**: a plain `Thread` (outside any scheduler) pushes into a queue that a task waits
           on and waits for its answer on a second queue.
        6. **memory**: RSS growth (after `GC.start`) per task parked on a `Queue#pop`, and per task
           parked in `wait_readable` on its own pipe; "per registered descriptor" is the difference.
           These are noisy (page granularity, malloc arenas): compare orders of magnitude.
        7. **bursts** (issue 18): **spawn burst**, one task spawns 2,000 tasks without blocking, each
           `sleep`ing a random 1–100 ms; lateness over every timer, those due while the spawner still
           ran included. **accept burst**, 1,500 connections (`lib/burst_clients.rb`) wait in the
           listen backlog when an acceptor starts taking them, one task per connection answering one
           byte, while a ticker task sleeps 1 ms at a time: the ticker's worst gap (how long the loop
           was held) and the burst's total time.

        Rubies 3.3 and 3.4 run in the Debian sid chroot (`.ci/sid-run`, made by `.ci/sid-setup`);
        farce runs there when `SID_RUBY=3.3 .ci/sid-run rake compile` (and 3.4) has built
        `lib/farce/3.3/` (`lib/farce/3.4/`).

        Raw per-run numbers: `bench/results/latest.json` (not committed). Rerun a subset with e.g.
        `BENCH_ONLY=pp1,http64 BENCH_RUNS=5 rake bench`.
      MD
    end

    # ---------------------------------------------------------------- main

    # Re-renders README.md and plot.svg from a saved results JSON (no benchmarking).
    def render(path)
      data = JSON.parse(File.read(path))
      @quick = data["quick"]
      @runs = data["runs"]
      @notes = data["notes"] || []
      @raw = data["raw"]
      @load = data["load"] || []
      contenders = data["contenders"].keys
      references = (data["references"] || {}).keys
      summary = summarize(contenders)
      plotted = write_plot(contenders, summary)
      print_table(contenders, summary)
      File.write(File.join(BENCH, "README.md"),
                 readme(contenders, references, summary, data["machine"], plotted, data["generated_at"]))
      warn "bench: re-rendered bench/README.md from #{path}"
    end

    def main
      if ARGV[0] == "--render"
        return render(ARGV[1] || File.join(RESULTS, "latest.json"))
      end

      ensure_tools
      ensure_built
      contenders = discover_contenders
      kases = cases
      references = kases.any? { |k| REFERENCE_CASES.include?(k.id) } ? discover_references(contenders) : []
      warn "bench: contenders #{contenders.join(', ')}; references #{references.join(', ')}; " \
           "#{kases.size} workloads × #{@runs} run(s)#{@quick ? ' (quick)' : ''}"
      info = machine
      run_all(contenders, kases, references)
      summary = summarize(contenders)
      write_outputs(contenders, references, summary, info)
    ensure
      @restore.each(&:call)
    end
  end
end

Bench::Runner.new.main if $PROGRAM_NAME == __FILE__
