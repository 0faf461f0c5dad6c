# frozen_string_literal: true

# A keep-alive HTTP client that makes a fixed number of requests over N
# connections to bench/http_hello.rb on 127.0.0.1, one request in flight per
# connection, and stops: two runs differ only in how many requests the
# server answered (bench/instructions.rb). Plain IO.select, no scheduler: it
# needs to be fast only against a server slowed down by callgrind.
#
#   ruby bench/lib/counted_client.rb PORT CONNECTIONS REQUESTS
require "socket"

module Bench
  module CountedClient
    REQUEST = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    BODY = "Hello, world!" # the end of every answer of http_hello.rb
    STALL_S = 120 # no answer for this long: the server is gone or stuck

    module_function

    def main(port, connections, total)
      sockets = Array.new([connections, total].min) { TCPSocket.new("127.0.0.1", port) }
      pending = {}
      sent = 0
      sockets.each do |s|
        s.write(REQUEST)
        sent += 1
        pending[s] = +""
      end
      done = 0
      while done < total
        ready, = IO.select(pending.keys, nil, nil, STALL_S)
        abort "counted_client: no answer from port #{port} in #{STALL_S} s (#{done} of #{total} done)" unless ready
        ready.each do |s|
          answer = pending[s]
          answer << s.read_nonblock(65_536)
          next unless answer.end_with?(BODY)

          done += 1
          if sent < total
            s.write(REQUEST)
            sent += 1
            pending[s] = +""
          else
            pending.delete(s)
          end
        end
      end
      sockets.each(&:close)
      puts "#{done} answers"
    end
  end
end

Bench::CountedClient.main(*ARGV.first(3).map { |a| Integer(a) }) if $PROGRAM_NAME == __FILE__
