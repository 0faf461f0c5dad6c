# Child script of test/test_ractors.rb: each of farce's hook behaviours run
# inside a Ractor other than the main one, one Ractor per case, one after
# another. Prints "CASE name value.inspect" for each (or "FAILED name ..."),
# then "DONE". BACKEND (a Symbol) and SCRIPTS_DIR are set before this code.
require File.join(SCRIPTS_DIR, "ractor_support")
require "socket"
require "timeout"
require "tmpdir"

# In a module, so that each lambda's self is shareable and the table can
# be handed to every Ractor.
module RactorCases
  CASES = {
    # ten fibers sleeping at once: all of them finish, together (one after
    # another would take 2 s; the bound is loose for a busy machine)
    sleep: lambda do |backend|
      done = 0
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Farce.run(backend: backend) { 10.times { Fiber.schedule { sleep 0.2; done += 1 } } }
      [done, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0 < 1.5]
    end,
    # the example the README gives: a read that waits for another fiber's write
    pipe: lambda do |backend|
      rd, wr = IO.pipe
      got = nil
      Farce.run(backend: backend) do
        Fiber.schedule { got = rd.read(5) }
        Fiber.schedule { wr.write("hello") }
      end
      rd.close
      wr.close
      got
    end,
    # 200 round trips over a socket pair, each side its own fiber
    socket_ping_pong: lambda do |backend|
      a, b = UNIXSocket.pair
      rounds = 0
      Farce.run(backend: backend) do
        Fiber.schedule { 200.times { b.write(b.readpartial(16)) } }
        Fiber.schedule do
          200.times do
            a.write("ping")
            rounds += 1 if a.readpartial(16) == "ping"
          end
        end
      end
      a.close
      b.close
      rounds
    end,
    # a TCP server accepting 20 clients that each send their number, and a
    # name resolved on the way (TCPSocket.new("localhost") asks address_resolve)
    tcp_accept_and_dns: lambda do |backend|
      server = TCPServer.new("127.0.0.1", 0)
      port = server.addr[1]
      got = []
      Farce.run(backend: backend) do
        Fiber.schedule do
          20.times do
            client = server.accept
            Fiber.schedule { got << client.read.to_i; client.close }
          end
        end
        20.times do |i|
          Fiber.schedule do
            s = TCPSocket.new(i.zero? ? "localhost" : "127.0.0.1", port)
            s.write(i.to_s)
            s.close
          end
        end
      end
      server.close
      [got.sort == (0...20).to_a, Addrinfo.getaddrinfo("localhost", nil).any?]
    end,
    # a Queue handing 100 items from one fiber to another, and 5 fibers taking
    # a Mutex in turn, each sleeping while it holds it
    queue_and_mutex: lambda do |backend|
      queue = Thread::Queue.new
      mutex = Thread::Mutex.new
      sum = 0
      inside = 0
      overlaps = 0
      Farce.run(backend: backend) do
        Fiber.schedule { 100.times { |i| queue << i; sleep 0 if i % 10 == 0 } }
        Fiber.schedule { 100.times { sum += queue.pop } }
        5.times do
          Fiber.schedule do
            mutex.synchronize do
              inside += 1
              overlaps += 1 if inside > 1
              sleep 0.01
              inside -= 1
            end
          end
        end
      end
      [sum, overlaps]
    end,
    # Timeout.timeout in a fiber: the loop raises it at the fiber's wait; and a
    # fiber holding the thread in a wait the scheduler is not asked about
    # (a blocking fiber's sleep): this Ractor's watcher thread raises it
    timeouts: lambda do |backend|
      outcomes = []
      Farce.run(backend: backend) do
        Fiber.schedule do
          Timeout.timeout(0.05) { sleep 5 }
          outcomes << :not_raised
        rescue Timeout::Error
          outcomes << :raised
        end
        Fiber.schedule do
          Timeout.timeout(0.05) { Fiber.new(blocking: true) { sleep 5 }.resume }
          outcomes << :held_not_raised
        rescue Timeout::Error
          outcomes << :held_raised
        end
      end
      outcomes.sort
    end,
    # Process.wait of a child while a ticker fiber keeps ticking
    process_wait: lambda do |backend|
      ticks = 0
      status = nil
      Farce.run(backend: backend) do
        Fiber.schedule { 5.times { sleep 0.01; ticks += 1 } }
        pid = Process.spawn("sh", "-c", "sleep 0.1; exit 7")
        _, status = Process.wait2(pid)
      end
      [status.exitstatus, ticks]
    end,
    # IO.select in a fiber (the io_select hook, Ruby 3.2+): it waits for
    # another fiber's write
    io_select: lambda do |backend|
      next :no_hook if RUBY_VERSION < "3.2" # IO.select blocks the thread there

      rd, wr = IO.pipe
      ready = nil
      Farce.run(backend: backend) do
        Fiber.schedule { ready = IO.select([rd], nil, nil, 5)&.first&.size }
        Fiber.schedule { sleep 0.01; wr.write("x") }
      end
      rd.close
      wr.close
      ready
    end,
    # stall detection: a fiber that holds the loop for 0.3 s is reported once
    # (the watchdog's signal reaches this Ractor's thread, whose postponed
    # job samples it)
    stall: lambda do |backend|
      reports = []
      on_stall = ->(report) { reports << report }
      Farce.run(backend: backend, stall_threshold: 0.05, on_stall: on_stall) do
        Fiber.schedule do
          t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0 < 0.3
        end
      end
      [reports.size, reports.all? { |r| r.duration >= 0.05 }]
    end,
    # the worker pool: a positional read of a file runs on one of this
    # Ractor's worker threads (io_pread, Ruby 3.3+) while a fiber ticks
    worker_pool: lambda do |backend|
      path = File.join(ENV.fetch("TMPDIR", "/tmp"), "farce-ractor-#{Process.pid}-#{rand(1 << 30)}")
      File.write(path, "0123456789")
      got = nil
      Farce.run(backend: backend) do
        Fiber.schedule { File.open(path) { |f| got = f.pread(4, 3) } }
      end
      got
    ensure
      File.unlink(path) if path && File.exist?(path)
    end,
  }
  Ractor.make_shareable(CASES)
end

RactorCases::CASES.each_key do |name|
  ractor = Ractor.new(name, BACKEND) { |case_name, backend| RactorCases::CASES[case_name].call(backend) }
  begin
    puts "CASE #{name} #{value_of(ractor).inspect}"
  rescue Exception => e # rubocop:disable Lint/RescueException -- reported, the parent asserts
    cause = e.cause || e
    puts "FAILED #{name} #{cause.class}: #{cause.message.lines.first&.chomp} #{cause.backtrace&.first(4)&.join(' < ')}"
  end
end
puts "DONE"
