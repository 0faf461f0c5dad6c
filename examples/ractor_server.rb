# frozen_string_literal: true

# An HTTP/1.1 keep-alive hello server on several cores in one process: one
# Ractor per core, each with its own farce scheduler and its own listening
# socket on the same port (SO_REUSEPORT: the kernel spreads the connections
# over them), one fiber per connection in each.
#
#   ruby -Ilib examples/ractor_server.rb [port] [ractors]
#
# farce is required here, in the main Ractor, before any Ractor starts
# (Ruby before 3.4 cannot load a library from another Ractor). Every response
# names the Ractor that served it (X-Served-By). INT or TERM ends the
# process.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "farce"
require "socket"
Warning[:experimental] = false # Ruby says once that Ractors are experimental

port = Integer(ARGV[0] || 9292)
count = Integer(ARGV[1] || 2)
backend = Farce.backend_from_environment

# In a module, so that the block's self is shareable: Ractor.new takes it.
module RactorServer
  SERVE = Ractor.make_shareable(lambda do |port, backend, name|
    server = Socket.new(:INET, :STREAM)
    server.setsockopt(:SOCKET, :REUSEADDR, true)
    server.setsockopt(:SOCKET, :REUSEPORT, true)
    server.bind(Addrinfo.tcp("0.0.0.0", port))
    server.listen(1024)
    body = "Hello from farce, #{name}\n"
    response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Served-By: #{name}\r\n" \
               "Content-Length: #{body.bytesize}\r\n\r\n#{body}"
    Farce.run(backend: backend) do
      loop do
        client, = server.accept
        Fiber.schedule do
          # one request per line ending in a blank line (no request bodies)
          while (line = client.gets)
            client.write(response) if line == "\r\n"
          end
        rescue Errno::ECONNRESET, Errno::EPIPE
          nil
        ensure
          client.close
        end
      end
    end
  end)
end

ractors = Array.new(count) do |i|
  Ractor.new(port, backend, "ractor #{i}") { |p, b, name| RactorServer::SERVE.call(p, b, name) }
end
puts "listening on port #{port} with #{count} Ractors (backend #{backend})"
%w[INT TERM].each { |signal| trap(signal) { exit!(0) } }
ractors.each { |r| r.respond_to?(:value) ? r.value : r.take }
