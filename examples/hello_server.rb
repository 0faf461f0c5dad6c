# frozen_string_literal: true

# A fiber-per-connection HTTP/1.1 keep-alive "hello" server on farce:
#
#   ruby -Ilib examples/hello_server.rb [port] [backend]
#
# Every accepted connection gets its own fiber; reads, writes and accept park
# that fiber while the event loop serves the others.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "farce"
require "socket"

port = Integer(ARGV[0] || 9292)
backend = (ARGV[1] || ENV["FARCE_BACKEND"] || "auto").to_sym
BODY = "Hello from farce\n"
RESPONSE = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: #{BODY.bytesize}\r\n\r\n#{BODY}".freeze

def serve(client)
  while (request_line = client.gets)
    keep_alive = !request_line.end_with?("HTTP/1.0\r\n")
    while (header = client.gets) && header != "\r\n"
      keep_alive = false if header.casecmp?("connection: close\r\n")
    end
    client.write(RESPONSE)
    break unless keep_alive
  end
rescue Errno::ECONNRESET, Errno::EPIPE, IOError
  nil # the client went away
ensure
  client.close
end

Farce.run(backend: backend) do
  server = TCPServer.new("127.0.0.1", port)
  warn "farce #{Farce::VERSION} (#{Fiber.scheduler.backend}) serving http://127.0.0.1:#{port}/ pid #{Process.pid}"
  trap("TERM") { exit }
  loop do
    client = server.accept
    Fiber.schedule { serve(client) }
  end
end
