# frozen_string_literal: true

# The fiber workload the fork tests run in every process of a fork tree
# (required by the child Rubies of test_fork.rb): pipes, sleeps, a Queue fed
# by another thread, a TCP exchange, a Ruby trap that must run while the loop
# is parked, Timeout and Thread#raise reaching a parked loop. Raises with
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

  def run(tag)
    got = {}
    trapped = 0
    previous_trap = trap(:USR1) { trapped += 1 }
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

      # The trap must run while this fiber (and so the loop) is parked.
      Fiber.schedule { Process.kill(:USR1, Process.pid) }
      Timeout.timeout(10) { sleep 0.001 until trapped.positive? }
      got[:trapped] = trapped.positive?

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

    expected = { pipe: tag, sleepers: 3, queue: tag, tcp: tag.upcase, trapped: true, timeout: :raised,
                 thread_raise: :raised }
    raise "workload #{tag} in pid #{Process.pid}: #{got.inspect}" unless got == expected

    Farce.core_info
  ensure
    trap(:USR1, previous_trap || "DEFAULT")
  end
end
