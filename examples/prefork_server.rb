# frozen_string_literal: true

# A preforking HTTP/1.1 keep-alive server on farce, the shape of Puma's or
# Unicorn's cluster mode: the master binds the port, serves the first
# requests itself on farce (a warm-up, a health check), then forks workers
# that share the listening socket, one fiber per connection in each.
#
#   ruby -Ilib examples/prefork_server.rb [port] [workers] [warmup_requests] [connections_per_worker]
#
# The master's Go runtime started while it served; each worker loads a fresh
# copy of farce's core at its first scheduler (Farce.core_info says which).
# Every response names the process that served it (X-Served-By). On TERM or
# INT the master stops its workers; each reports how many responses it sent.
# A worker holds at most connections_per_worker connections at a time (like
# Puma's thread cap) and leaves the rest in the accept queue for its
# siblings; without a cap, the worker that wakes first takes a whole burst.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "farce"
require "socket"

port = Integer(ARGV[0] || 9292)
workers = Integer(ARGV[1] || 4)
warmup = Integer(ARGV[2] || 10)
per_worker = Integer(ARGV[3] || 16)
backend = (ENV["FARCE_BACKEND"] || "auto").to_sym

# Serves one connection until the client closes it; yields after each response.
def serve(client)
  body = "Hello from farce, pid #{Process.pid}\n"
  response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Served-By: #{Process.pid}\r\n" \
             "Content-Length: #{body.bytesize}\r\n\r\n#{body}"
  while (request_line = client.gets)
    keep_alive = !request_line.end_with?("HTTP/1.0\r\n")
    while (header = client.gets) && header != "\r\n"
      keep_alive = false if header.casecmp?("connection: close\r\n")
    end
    client.write(response)
    yield
    break unless keep_alive
  end
rescue Errno::ECONNRESET, Errno::EPIPE, IOError
  nil # the client went away
ensure
  client.close
end

server = TCPServer.new("127.0.0.1", port)
$stdout.sync = true
# One write per line: the workers share stdout, and `puts` may write a line
# and its newline separately, which interleaves lines of several processes.
def say(line) = $stdout.write("#{line}\n")

say "master #{Process.pid} listening on #{server.local_address.ip_port}"

# The master serves `warmup` requests on farce before it forks.
served = 0
Farce.run(backend: backend) do
  while served < warmup
    next unless server.wait_readable(0.05) # so that the count is checked while keep-alive clients talk

    client = server.accept_nonblock(exception: false)
    Fiber.schedule { serve(client) { served += 1 } } unless client == :wait_readable
  end
end
say "master served #{served} on #{Farce.core_info[:kind]} core, generation #{Farce.core_info[:generation]}"

pids = workers.times.map do
  fork do
    sent = 0
    stopping = false
    %w[TERM INT].each { |sig| trap(sig) { stopping = true } }
    begin
      Farce.run(backend: backend) do
        info = Farce.core_info
        say "worker #{Process.pid} up on #{info[:kind]} core, generation #{info[:generation]}"
        # A trap only sets the flag; this fiber closes the socket, which ends accept.
        Fiber.schedule do
          sleep 0.05 until stopping
          server.close
        end
        slots = Queue.new
        per_worker.times { slots << true }
        loop do
          slots.pop
          client = begin
            server.accept
          rescue IOError, Errno::EBADF
            break # closed by the stop fiber
          end
          Fiber.schedule do
            serve(client) { sent += 1 }
          ensure
            slots << true
          end
        end
      end
    ensure
      say "worker #{Process.pid} served #{sent}"
    end
  end
end
say "workers #{pids.join(' ')}"
server.close

%w[TERM INT].each { |sig| trap(sig) { pids.each { |pid| Process.kill(:TERM, pid) rescue nil } } }
statuses = pids.map { |pid| Process.wait2(pid)[1] }
exit(statuses.all?(&:success?) ? 0 : 1)
