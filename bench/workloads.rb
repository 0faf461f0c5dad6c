# frozen_string_literal: true

# Every benchmark workload except the HTTP server (bench/http_hello.rb), written
# once against Bench::Harness and run unchanged under each contender:
#
#   ruby bench/workloads.rb CONTENDER WORKLOAD [key=value ...]
#   ruby bench/workloads.rb farce-epoll pingpong pairs=100 seconds=2
#   .ci/sid-run ruby bench/workloads.rb async timers count=100000   (Async: Ruby 3.3 in the sid chroot)
#
# Prints one JSON object on stdout. Every loop is bounded by a deadline or a count.
require "json"
require "socket"
require "io/wait"
require "rbconfig"
require "fileutils"
require "tmpdir"
require_relative "lib/harness"

module Bench
  module Workloads
    module_function

    # Two endpoints: a pipe's (read end, write end), or a socketpair's two
    # sockets (what servers read and write).
    def endpoints(over)
      over == "socket" ? UNIXSocket.pair : IO.pipe
    end

    # Two tasks bounce one byte over two pipes (or socketpairs) until
    # deadline; counter[index] gets the round trips. on_done runs in the
    # pinging task when it stops.
    def pingpong_pair(harness, deadline, counter, index, on_done = nil, over: "pipe")
      r1, w1 = endpoints(over)
      r2, w2 = endpoints(over)
      harness.spawn do
        while (byte = r1.read(1))
          w2.write(byte)
        end
        r1.close
        w2.close
      end
      harness.spawn do
        n = 0
        while Bench.now < deadline
          w1.write("x")
          r2.read(1)
          n += 1
        end
        w1.close
        r2.close
        counter[index] = n
        on_done&.call
      end
    end

    # 1. Ping-pong over pipes (over=socket: socketpairs): round trips per
    # second, summed over all pairs.
    def pingpong(harness, pairs: 1, seconds: 2.0, over: "pipe")
      pairs = Integer(pairs)
      seconds = Float(seconds)
      raise ArgumentError, "over must be pipe or socket, not #{over.inspect}" unless %w[pipe socket].include?(over)

      counter = Array.new(pairs, 0)
      started = Bench.now
      harness.run do
        deadline = Bench.now + seconds
        pairs.times { |i| pingpong_pair(harness, deadline, counter, i, over: over) }
      end
      elapsed = Bench.now - started
      { round_trips_per_second: (counter.sum / elapsed).round, pairs: pairs, over: over, elapsed_s: elapsed.round(3) }
    end

    # 3. Scale: IDLE loopback TCP connections, each with a task parked reading
    # it, plus one active ping-pong pair. The other ends live in a helper
    # process (bench/lib/idle_peer.rb) so that this process holds one
    # descriptor per connection.
    def scale(harness, idle: 10_000, seconds: 2.0)
      idle = Integer(idle)
      seconds = Float(seconds)
      limit = Bench.raise_nofile
      wanted = idle
      idle = [idle, limit - 256].min
      peer = nil
      sockets = []
      setup_started = Bench.now
      if idle.positive?
        peer = IO.popen([RbConfig.ruby, File.join(__dir__, "lib", "idle_peer.rb"), idle.to_s], "r+")
        port = Integer(peer.gets)
        sockets = Array.new(idle) { TCPSocket.new("127.0.0.1", port) }
      end
      counter = [0]
      rate = nil
      setup_s = nil
      parked = 0
      gc0 = gc1 = nil
      harness.run do
        sockets.each do |socket|
          harness.spawn do
            socket.read(1) # parks until the helper exits (EOF)
            socket.close
          end
        end
        parked = sockets.size
        gc0 = Bench.gc_snapshot
        start = Bench.now
        setup_s = start - setup_started
        finish = proc do
          rate = counter[0] / (Bench.now - start)
          gc1 = Bench.gc_snapshot
          peer&.close_write # the helper exits; every idle connection sees EOF
        end
        pingpong_pair(harness, start + seconds, counter, 0, finish)
      end
      peer&.close
      { round_trips_per_second: rate.round, idle: parked, idle_wanted: wanted,
        setup_s: (setup_s || 0).round(3), nofile: limit, **Bench.gc_per(gc0, gc1, counter[0]) }
    ensure
      sockets&.each { |s| s.close unless s.closed? }
    end

    # 4. Timers: COUNT tasks each sleep a random duration in 1..MAX_MS ms
    # (same seed for everyone). Throughput = timers per CPU second of the whole
    # process (all threads). Lateness = wake time minus due time, over the
    # timers the spawning loop did not hold up: those due after it finished,
    # or woken while it still ran (a fiber scheduler runs nothing else while
    # the spawner holds the CPU; threads and some schedulers interleave).
    def timers(harness, count: 100_000, max_ms: 500)
      count = Integer(count)
      max_ms = Integer(max_ms)
      rng = Random.new(42)
      durations = Array.new(count) { (1 + rng.rand(max_ms)) / 1000.0 }
      due = Array.new(count)
      woke = Array.new(count)
      spawned_at = nil
      cpu0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
      gc0 = Bench.gc_snapshot
      started = Bench.now
      harness.run do
        spawn_sleepers(harness, durations, due, woke)
        spawned_at = Bench.now
      end
      elapsed = Bench.now - started
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu0
      gc1 = Bench.gc_snapshot
      counted = (0...count).select { |i| due[i] >= spawned_at || woke[i] <= spawned_at }
      late = counted.map { |i| woke[i] - due[i] }.sort
      late = [Float::NAN] if late.empty?
      early = count.times.count { |i| woke[i] < due[i] }
      { timers_per_cpu_second: (count / cpu).round, count: count, elapsed_s: elapsed.round(3),
        cpu_s: cpu.round(3), spawn_s: (spawned_at - started).round(3),
        lateness_p50_ms: (Bench.percentile(late, 0.50) * 1000).round(3),
        lateness_p99_ms: (Bench.percentile(late, 0.99) * 1000).round(3),
        lateness_max_ms: (late.last * 1000).round(3), lateness_counted: counted.size,
        woke_early: early, peak_alive: peak_alive(due, woke, durations), **gc_pauses(gc0, gc1) }
    end

    # One task per duration, each sleeping it; due[i] and woke[i] get when
    # task i should wake and when it did (timers, spawn_burst).
    def spawn_sleepers(harness, durations, due, woke)
      durations.each_with_index do |d, i|
        harness.spawn do
          due[i] = Bench.now + d
          sleep(d)
          woke[i] = Bench.now
        end
      end
    end

    # The most sleepers parked at once (each is alive from due - duration to
    # woke): a faster spawner has more of them, and every minor GC marks every
    # parked fiber again, so its pauses grow with this number.
    def peak_alive(due, woke, durations)
      events = due.each_index.flat_map { |i| [[due[i] - durations[i], 1], [woke[i], -1]] }
      alive = peak = 0
      events.sort!.each { |_, step| peak = [peak, alive += step].max }
      peak
    end

    # GC over a run: collections and their mean length (where the Ruby keeps GC time).
    def gc_pauses(before, after)
      gcs = after[:minor] + after[:major] - before[:minor] - before[:major]
      out = { gc_count: gcs }
      out[:gc_ms_mean] = ((after[:ms] - before[:ms]).to_f / gcs).round(2) if gcs.positive? && before[:ms] && after[:ms]
      out
    end

    # 5a. Queue hand-off between two tasks (Thread::Queue ping-pong).
    def queue(harness, seconds: 2.0)
      seconds = Float(seconds)
      q1 = Thread::Queue.new
      q2 = Thread::Queue.new
      n = 0
      started = Bench.now
      harness.run do
        deadline = Bench.now + seconds
        harness.spawn do
          while (x = q1.pop)
            q2.push(x)
          end
        end
        harness.spawn do
          while Bench.now < deadline
            q1.push(1)
            q2.pop
            n += 1
          end
          q1.push(nil)
        end
      end
      elapsed = Bench.now - started
      { round_trips_per_second: (n / elapsed).round, elapsed_s: elapsed.round(3) }
    end

    # 5b. Cross-thread wake-ups: a plain Thread (no scheduler) pushes into a
    # queue a task waits on, and waits for the answer on a second queue.
    def xthread(harness, seconds: 2.0)
      seconds = Float(seconds)
      q1 = Thread::Queue.new
      q2 = Thread::Queue.new
      n = 0
      other = nil
      started = Bench.now
      harness.run do
        deadline = Bench.now + seconds
        harness.spawn do
          while (x = q1.pop)
            q2.push(x)
          end
        end
        other = Thread.new do
          while Bench.now < deadline
            q1.push(1)
            q2.pop
            n += 1
          end
          q1.push(nil)
        end
      end
      other.join
      elapsed = Bench.now - started
      { round_trips_per_second: (n / elapsed).round, elapsed_s: elapsed.round(3) }
    end

    # 6. Memory: RSS growth per parked task (what=fiber: parked on a Queue) or
    # per task parked on its own pipe (what=io: wait_readable). The runner
    # derives the cost of a registered descriptor as io minus fiber.
    def memory(harness, count: 10_000, what: "fiber")
      count = Integer(count)
      Bench.raise_nofile
      result = nil
      harness.run do
        gate = Thread::Queue.new
        done = Thread::Queue.new
        # Warm up both paths so one-time costs (runtime start, first
        # registration, GC heap pages) stay out of the measurement.
        warm = Array.new(200) { IO.pipe }
        200.times { harness.spawn { gate.pop; done.push(1) } }
        warm.each { |r, _w| harness.spawn { r.wait_readable; done.push(1) } }
        200.times { gate.push(1) }
        warm.each { |_r, w| w.close }
        400.times { done.pop }
        warm.each { |r, _w| r.close }

        pipes = what == "io" ? Array.new(count) { IO.pipe } : []
        3.times { GC.start }
        base = Bench.rss
        if what == "io"
          pipes.each { |r, _w| harness.spawn { r.wait_readable; done.push(1) } }
        else
          count.times { harness.spawn { gate.pop; done.push(1) } }
        end
        3.times { GC.start }
        grown = Bench.rss - base
        result = { bytes_per_task: (grown.to_f / count).round, count: count, what: what, rss_base_mb: (base / 1048576.0).round(1) }
        if what == "io"
          pipes.each { |_r, w| w.close }
        else
          count.times { gate.push(1) }
        end
        count.times { done.pop }
        pipes.each { |r, _w| r.close }
      end
      result
    end

    # 7a. Spawn burst: one task spawns COUNT tasks without blocking, each
    # sleeping a random 1..MAX_MS ms (same seed for everyone). Lateness =
    # wake time minus due time over every timer, including those due while
    # the spawner still ran: a loop that lets the spawner hold it fires them
    # late by the rest of the burst.
    def spawn_burst(harness, count: 2000, max_ms: 100)
      count = Integer(count)
      max_ms = Integer(max_ms)
      rng = Random.new(7)
      durations = Array.new(count) { (1 + rng.rand(max_ms)) / 1000.0 }
      due = Array.new(count)
      woke = Array.new(count)
      spawn_s = nil
      harness.run do
        t0 = Bench.now
        spawn_sleepers(harness, durations, due, woke)
        spawn_s = Bench.now - t0
      end
      late = count.times.map { |i| woke[i] - due[i] }.sort
      { lateness_p50_ms: (Bench.percentile(late, 0.50) * 1000).round(3),
        lateness_p99_ms: (Bench.percentile(late, 0.99) * 1000).round(3),
        lateness_max_ms: (late.last * 1000).round(3), spawn_s: spawn_s.round(3), count: count }
    end

    # 7b. Accept burst: COUNT connections wait in the listen backlog (opened
    # by a helper process, bench/lib/burst_clients.rb, each with a one-byte
    # request) when an acceptor task starts taking them, spawning one task
    # per connection that answers one byte. Meanwhile a ticker task sleeps
    # 1 ms at a time. Reports the ticker's worst gap during the burst (how
    # long the loop was held) and the burst's total time (first accept to
    # last answer).
    def accept_burst(harness, count: 1500)
      count = Integer(count)
      Bench.raise_nofile
      server = TCPServer.new("127.0.0.1", 0)
      server.listen(4096)
      clients = IO.popen([RbConfig.ruby, File.join(__dir__, "lib", "burst_clients.rb"),
                          server.addr[1].to_s, count.to_s], "r+")
      line = clients.gets
      abort "burst_clients: #{line.inspect}" unless line == "connected\n"
      worst_gap = 0.0
      ticks = 0
      burst_s = nil
      harness.run do
        answered = 0
        bursting = true
        started = Bench.now
        harness.spawn do
          last = Bench.now
          while bursting
            sleep 0.001
            t = Bench.now
            worst_gap = t - last if t - last > worst_gap
            last = t
            ticks += 1
          end
        end
        harness.spawn do
          count.times do
            client = server.accept
            harness.spawn do
              client.readpartial(1)
              client.write("y")
              client.close
              answered += 1
              if answered == count
                burst_s = Bench.now - started
                bursting = false
              end
            end
          end
        end
      end
      clients.close
      { worst_gap_ms: (worst_gap * 1000).round(3), burst_s: burst_s.round(3), ticks: ticks, count: count }
    ensure
      server&.close
    end

    # File reads: `files` tasks each read their own file of `mib` MiB from
    # the disk (dropped from the page cache first: fdatasync when written,
    # then IO#advise(:dontneed), Linux's posix_fadvise), in chunks of
    # `chunk_kib` KiB, while a ticker task sleeps 1 ms at a time and keeps
    # its worst gap (and the 99th percentile of its gaps): how long the loop
    # was held. The files are made once
    # per size under `dir` (default: the system's temporary directory) and
    # kept for the next run (keep=0 removes them).
    def file_reads(harness, files: 64, mib: 64, chunk_kib: 256, dir: nil, keep: "1")
      files = Integer(files)
      bytes = Integer(mib) * (1 << 20)
      chunk = Integer(chunk_kib) * 1024
      dir ||= File.join(Dir.tmpdir, "farce-bench-files-#{mib}mib")
      paths = Array.new(files) { |i| File.join(dir, "file#{i}") }
      make_files(paths, bytes)
      paths.each { |path| File.open(path, "rb") { |f| f.advise(:dontneed) } }
      gaps = []
      finished = [] # [bytes read, when] per task: Array#<< is one step for threads too
      started = nil
      harness.run do
        started = Bench.now
        harness.spawn do
          last = Bench.now
          while finished.size < files
            sleep 0.001
            t = Bench.now
            gaps << t - last
            last = t
          end
        end
        paths.each do |path|
          harness.spawn do
            buffer = String.new(capacity: chunk)
            total = 0
            File.open(path, "rb") do |f|
              total += buffer.bytesize while f.read(chunk, buffer)
            end
            finished << [total, Bench.now]
          end
        end
      end
      read = finished.sum(&:first)
      elapsed = finished.map(&:last).max - started
      raise "read #{read} bytes, expected #{files * bytes}" unless read == files * bytes

      gaps.sort!
      { worst_gap_ms: ((gaps.last || 0) * 1000).round(3), gap_p99_ms: ((Bench.percentile(gaps, 0.99) || 0) * 1000).round(3),
        mib_per_second: (read / elapsed / (1 << 20)).round(1), elapsed_s: elapsed.round(3), ticks: gaps.size,
        files: files, mib_per_file: Integer(mib), chunk_kib: chunk / 1024 }
    ensure
      FileUtils.rm_rf(dir) if dir && keep == "0"
    end

    # Writes each missing or short file (random bytes, fdatasync'd so that
    # its pages are clean and advise(:dontneed) can drop them).
    def make_files(paths, bytes)
      FileUtils.mkdir_p(File.dirname(paths.first))
      block = Random.new(7).bytes([bytes, 1 << 20].min)
      paths.each do |path|
        next if File.size?(path) == bytes

        File.open(path, "wb") do |f|
          (bytes / block.bytesize).times { f.write(block) }
          f.write(block.byteslice(0, bytes % block.bytesize))
          f.fdatasync
        end
      end
    end
  end
end

if $PROGRAM_NAME == __FILE__
  contender, workload, *pairs = ARGV
  abort "usage: ruby bench/workloads.rb CONTENDER WORKLOAD [key=value ...]" unless contender && workload
  params = pairs.to_h { |kv| k, v = kv.split("=", 2); [k.to_sym, v] }
  harness = Bench::Harness.new(contender)
  unless Bench::Workloads.respond_to?(workload)
    abort "unknown workload #{workload} (pingpong scale timers queue xthread memory spawn_burst accept_burst file_reads)"
  end
  result = Bench::Workloads.public_send(workload, harness, **params)
  puts JSON.generate(contender: contender, workload: workload, params: params,
                     versions: harness.versions, result: result)
end
