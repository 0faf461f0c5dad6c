# frozen_string_literal: true

# Fiber-per-connection (or thread-per-connection) HTTP/1.1 keep-alive "hello"
# server on a plain TCPServer, with hand-written minimal HTTP parsing. The same
# code runs under every contender:
#
#   ruby bench/http_hello.rb CONTENDER [port]      # port 0 (default): any free port
#
# Listens on 127.0.0.1 only, prints "READY <port> <ruby> <pid> <tids>" on stdout, and exits as soon
# as its stdin reaches EOF (or after MAX_LIFETIME seconds), so a driver can
# always stop it, even through sid-run. A "gc" line on stdin is answered on
# stdout with Ruby's collections so far (gc_line).
require "socket"
require_relative "lib/harness"

module Bench
  module HttpHello
    BODY = "Hello, world!"
    KEEP = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: #{BODY.bytesize}\r\n\r\n#{BODY}".freeze
    CLOSE = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: #{BODY.bytesize}\r\nConnection: close\r\n\r\n#{BODY}".freeze
    BAD = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    MAX_HEAD = 16 * 1024
    MAX_LIFETIME = 900

    module_function

    # Serves requests on one connection until the client closes it, asks for
    # Connection: close, or sends something that is not HTTP/1.x.
    def serve(client)
      buffer = +""
      loop do
        head_end = nil
        until (head_end = buffer.index("\r\n\r\n"))
          return if buffer.bytesize > MAX_HEAD

          buffer << client.readpartial(16 * 1024)
        end
        head = buffer.slice!(0, head_end + 4)
        request_line, *header_lines = head.split("\r\n")
        _method, _target, version = request_line.split(" ", 3)
        unless version&.start_with?("HTTP/1.")
          client.write(BAD)
          return
        end
        keep_alive = version == "HTTP/1.1"
        body_length = 0
        header_lines.each do |line|
          name, value = line.split(":", 2)
          next unless value

          if name.casecmp?("connection")
            v = value.strip
            keep_alive = false if v.casecmp?("close")
            keep_alive = true if v.casecmp?("keep-alive")
          elsif name.casecmp?("content-length")
            body_length = value.strip.to_i
          end
        end
        buffer << client.readpartial(16 * 1024) while buffer.bytesize < body_length
        buffer.slice!(0, body_length)
        client.write(keep_alive ? KEEP : CLOSE)
        return unless keep_alive
      end
    rescue EOFError, IOError, SystemCallError
      nil
    ensure
      client.close unless client.closed?
    end

    # "GC <minor> <major> <ms>": the collections so far and the time they
    # took (GC.stat[:time]; "-" where Ruby keeps no such time). The runner
    # asks as the measured part of a run begins and ends: with thousands of
    # fibers parked every minor collection marks each of them again, so how
    # often a contender's process collects weighs on its CPU per request.
    def gc_line
      stat = GC.stat
      "GC #{stat[:minor_gc_count]} #{stat[:major_gc_count]} #{stat[:time] || '-'}"
    end

    def main(contender, port)
      _soft, hard = Process.getrlimit(:NOFILE)
      Process.setrlimit(:NOFILE, hard, hard)
      harness = Harness.new(contender)
      server = TCPServer.new("127.0.0.1", port)
      server.listen(4096)
      # Stop on stdin EOF, from a plain thread outside any scheduler; a
      # "gc" line asks for Ruby's collections so far (gc_line).
      Thread.new do
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + MAX_LIFETIME
        while IO.select([$stdin], nil, nil, [deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC), 0].max) &&
              (line = $stdin.gets)
          next unless line.strip == "gc"

          $stdout.puts gc_line
          $stdout.flush
        end
        exit!(0)
      end
      # The threads that exist before the scheduler starts are Ruby's own; any
      # thread that appears later is the Go runtime's (the runner splits the
      # server's CPU by thread from /proc/PID/task with this list).
      ruby_threads = Dir.children("/proc/self/task").join(",") rescue ""
      harness.run do
        $stdout.puts "READY #{server.addr[1]} #{RUBY_VERSION} #{Process.pid} #{ruby_threads}"
        $stdout.flush
        loop do
          client = server.accept
          harness.spawn { serve(client) }
        end
      end
    end
  end
end

Bench::HttpHello.main(ARGV[0] || "farce", Integer(ARGV[1] || 0)) if $PROGRAM_NAME == __FILE__
