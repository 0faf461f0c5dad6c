# frozen_string_literal: true

# Helper for the accept_burst workload: opens COUNT loopback connections to
# PORT, each with a one-byte request already sent, so that all of them wait
# in the listen backlog at once; prints "connected", then reads every
# one-byte answer and exits when its stdin reaches EOF (or 10 minutes pass).
require "socket"

port = Integer(ARGV[0])
count = Integer(ARGV[1])
_soft, hard = Process.getrlimit(:NOFILE)
Process.setrlimit(:NOFILE, hard, hard)
sockets = Array.new(count) do
  s = TCPSocket.new("127.0.0.1", port)
  s.write("x")
  s
end
$stdout.puts "connected"
$stdout.flush
sockets.each { |s| s.read(1) }
IO.select([$stdin], nil, nil, 600)
exit!(0)
