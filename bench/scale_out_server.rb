# frozen_string_literal: true

# The HTTP hello server (bench/http_hello.rb's request handling, a fiber per
# connection on farce) served by several workers at once, each with a
# listening socket of its own on the same port (SO_REUSEPORT: the kernel
# spreads new connections over them):
#
#   ruby bench/scale_out_server.rb ractors N PORT     # N Ractors in one process
#   ruby bench/scale_out_server.rb processes N PORT   # N forked processes
#
# bench/scale_out.rb drives it. Prints "READY <pid>" once every worker was
# started (the driver then waits until the kernel shows N listening sockets
# on the port), and exits, workers included, when its stdin reaches EOF.
require "socket"
require_relative "lib/harness"
require_relative "http_hello"

$LOAD_PATH.unshift(Bench.farce_lib)
require "farce" # in the main Ractor: Ruby before 3.4 refuses a require in any other

module Bench
  module ScaleOutServer
    module_function

    # A listening socket of this worker's own on port.
    def listener(port)
      socket = Socket.new(:INET, :STREAM)
      socket.setsockopt(:SOCKET, :REUSEADDR, true)
      socket.setsockopt(:SOCKET, :REUSEPORT, true)
      socket.bind(Addrinfo.tcp("127.0.0.1", port))
      socket.listen(4096)
      socket
    end

    # One worker: its own socket and its own scheduler, until the process ends.
    def serve(port)
      server = listener(port)
      Farce.run do
        loop do
          client, = server.accept
          Fiber.schedule { HttpHello.serve(client) }
        end
      end
    end

    def main(mode, count, port)
      _soft, hard = Process.getrlimit(:NOFILE)
      Process.setrlimit(:NOFILE, hard, hard)
      case mode
      when "ractors"
        # a Ractor's value is never taken: the workers serve until exit!
        count.times.map { Ractor.new(port) { |p| Bench::ScaleOutServer.serve(p) } }
      when "processes"
        children = count.times.map { fork { serve(port) } }
        at_stop = -> { children.each { |pid| Process.kill(:KILL, pid) rescue nil } }
      else
        abort "scale_out_server: MODE is ractors or processes, not #{mode.inspect}"
      end
      $stdout.puts "READY #{Process.pid}"
      $stdout.flush
      IO.select([$stdin], nil, nil, HttpHello::MAX_LIFETIME)
      at_stop&.call
      exit!(0)
    end
  end
end

Bench::ScaleOutServer.main(ARGV[0], Integer(ARGV[1] || 1), Integer(ARGV.fetch(2))) if $PROGRAM_NAME == __FILE__
