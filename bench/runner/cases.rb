# frozen_string_literal: true

# What runs: the workload cases (ids, arguments, expected durations) and the command line of
# each case for a contender.
module Bench
  class Runner
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

    # MiB per file of the file-reads case (64 files): BENCH_FILE_MIB, else 16
    # (1 GiB in all, under a minute per run on a shared 2-CPU machine; the
    # 64 MiB the case was first asked for, 4 GiB, is BENCH_FILE_MIB=64), 2 quick.
    def file_mib
      Integer(ENV["BENCH_FILE_MIB"] || (@quick ? 2 : 16))
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
        *HTTP_CONNECTIONS.map { |c| http_case(c, wrk_s) },
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
        Case.new(id: "files", title: "file reads: 64 tasks each reading its own uncached file, 1 ms ticker",
                 kind: :workload, args: ["file_reads", "files=64", "mib=#{file_mib}"], expect_s: 60),
        Case.new(id: "memfiber", title: "memory per parked task", kind: :workload,
                 args: ["memory", "count=#{q ? 3000 : 8000}", "what=fiber"], expect_s: 5),
        Case.new(id: "memio", title: "memory per task parked on a descriptor", kind: :workload,
                 args: ["memory", "count=#{q ? 3000 : 8000}", "what=io"], expect_s: 5)
      ]
      if ENV["BENCH_ONLY"]
        only = ENV["BENCH_ONLY"].split(",").map(&:strip).flat_map { |id| id == "scaling" ? SCALING_CASES : [id] }
        @cases_left_out = list.map(&:id) - only # for the run's notes (note_subset)
        list.select! { |c| only.include?(c.id) }
      end
      # Only a run that has the timers case checks (and may raise) vm.max_map_count.
      list.each { |c| c.args[1] = "count=#{timer_count(100_000)}" if c.id == "timers" && !q }
      list
    end

    # The HTTP hello server under wrk with c keep-alive connections: 64 and 1,000
    # for every contender, the other counts for the scaling contenders only.
    # From 4,000 connections the runs are longer: wrk spends the first second
    # or so of each opening its connections, the server should serve them all
    # a while (YJIT, the heap grown for that many fibers) before the measured
    # run, and the steady part of that run (bench/lib/steady_window.rb) begins
    # only once all are open.
    def http_case(c, wrk_s)
      many = c >= 4000 && !@quick
      warmup = @quick ? 0 : (many ? 4 : 2)
      seconds = many ? wrk_s + 3 : wrk_s
      Case.new(id: "http#{c}", title: "HTTP hello, wrk #{count_text(c)} connections", kind: :http,
               args: { connections: c, seconds: seconds, warmup: warmup }, expect_s: seconds + warmup + 6,
               only: HTTP_EVERYONE.include?(c) ? nil : :scaling)
    end

    # 10000 => "10,000"
    def count_text(n)
      n.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end

    def command(contender, script, *args)
      name, env, ver = parse_contender(contender)
      [*env_prefix(name, env, ver), *ruby_command(ver), *load_path_args(name, ver), File.join(BENCH, script), name,
       *args.map(&:to_s)]
    end

    # -I for io-event's native selector where RUBYLIB cannot carry it (the chroot's Rubies).
    def load_path_args(name, ver)
      name == "async-epoll" && !other_rubies[ver] && (lib = io_event_ext(ver)) ? ["-I", lib] : []
    end

    # `env VAR=VALUE ...` for a contender's settings (and Async's load path
    # where it comes from the chroot), or nothing.
    def env_prefix(name, env, ver)
      env = env.merge("RUBYLIB" => async_path(ver)) if name == "async-farce" && other_rubies[ver] && async_path(ver)
      if name == "async-epoll" && (lib = io_event_ext(ver))
        if other_rubies[ver]
          env = env.merge("RUBYLIB" => [lib, async_path(ver)].compact.join(":"))
        else # the chroot drops RUBYLIB: the folder is bound in and named with -I (ruby_command)
          env = env.merge("SID_BIND" => File.dirname(lib))
        end
      end
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
  end
end
