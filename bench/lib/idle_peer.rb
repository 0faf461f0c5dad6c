# frozen_string_literal: true

# Helper for the scale workload: accepts COUNT loopback TCP connections and
# holds them open, idle, until its stdin reaches EOF (or 10 minutes pass).
# Prints the listening port on stdout.
require "socket"

count = Integer(ARGV[0])
_soft, hard = Process.getrlimit(:NOFILE)
Process.setrlimit(:NOFILE, hard, hard)
server = TCPServer.new("127.0.0.1", 0)
server.listen(4096)
$stdout.puts server.addr[1]
$stdout.flush
held = []
Thread.new { count.times { held << server.accept } }
IO.select([$stdin], nil, nil, 600)
exit!(0)
