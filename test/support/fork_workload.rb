# frozen_string_literal: true

# The fiber workload the fork tests run in every process of a fork tree
# (required by the child Rubies of test_fork.rb): pipes, sleeps, a Queue fed
# by another thread, a TCP exchange, Ruby traps (USR1, INT, TERM, CHLD) that
# must run while the loop is parked, Timeout, Thread#raise and Thread#kill
# reaching a parked loop. Raises with
# what went wrong, so that a child's exit status says whether it worked.
require "farce"
require "socket"
require "timeout"

module ForkWorkload
  class Interrupted < StandardError; end

  module_function

  def backend
    (ENV["FARCE_BACKEND"] || "auto").to_sym
  end

  SIGNALS = %i[USR1 INT TERM CHLD].freeze

  def run(tag)
    got = {}
    trapped = Hash.new(0)
    previous_traps = SIGNALS.to_h { |sig| [sig, trap(sig) { trapped[sig] += 1 }] }
    Farce.run(backend: backend) do
      r, w = IO.pipe
      Fiber.schedule do
        sleep 0.002
        w.write(tag)
        w.close
      end
      got[:pipe] = r.read
      r.close

      sleepers = 3.times.map { Fiber.schedule { sleep 0.005 } }
      got[:sleepers] = sleepers.size

      queue = Queue.new
      feeder = Thread.new do
        sleep 0.003
        queue << tag
      end
      got[:queue] = queue.pop
      feeder.join

      server = TCPServer.new("127.0.0.1", 0)
      Fiber.schedule do
        client = server.accept
        client.write(client.gets.upcase)
        client.close
      end
      socket = TCPSocket.new("127.0.0.1", server.local_address.ip_port)
      socket.write("#{tag}\n")
      got[:tcp] = socket.read.chomp
      socket.close
      server.close

      # Each trap must run while this fiber (and so the loop) is parked.
      %i[USR1 INT TERM].each do |sig|
        Fiber.schedule { Process.kill(sig, Process.pid) }
        Timeout.timeout(10) { sleep 0.001 until trapped[sig].positive? }
      end
      # CHLD: a child forked inside a fiber (it never touches farce).
      pid = fork { exit!(0) }
      Process.wait(pid)
      Timeout.timeout(10) { sleep 0.001 until trapped[:CHLD].positive? }
      got[:trapped] = SIGNALS.all? { |sig| trapped[sig].positive? }

      got[:timeout] = begin
        Timeout.timeout(0.01) { sleep 5 }
      rescue Timeout::Error
        :raised
      end
    end

    # Thread#raise reaching a loop parked in the Go core.
    main = Thread.current
    raiser = Thread.new do
      sleep 0.01
      main.raise(Interrupted)
    end
    got[:thread_raise] = begin
      Farce.run(backend: backend) { sleep 5 }
    rescue Interrupted
      :raised
    end
    raiser.join

    # Thread#kill of a thread whose loop is parked in the Go core.
    parked = Thread.new { Farce.run(backend: backend) { sleep 5 } }
    sleep 0.01
    parked.kill
    got[:thread_kill] = parked.join(5) ? :killed : :still_running

    expected = { pipe: tag, sleepers: 3, queue: tag, tcp: tag.upcase, trapped: true, timeout: :raised,
                 thread_raise: :raised, thread_kill: :killed }
    raise "workload #{tag} in pid #{Process.pid}: #{got.inspect} traps #{trapped.inspect}" unless got == expected

    Farce.core_info
  ensure
    previous_traps&.each { |sig, previous| trap(sig, previous || "DEFAULT") }
  end
end
