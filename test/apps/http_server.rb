# frozen_string_literal: true

# The local HTTP server the applications suite's HTTP clients talk to:
# WEBrick, a thread per connection, in a process of its own with no fiber
# scheduler, so that what the clients do is all that runs on the loop under
# test. It binds a free loopback port, prints it on a line of its own, and
# serves until its standard input reaches end of file (the test process that
# started it holds the other end: when that process ends, however it ends,
# so does the server).
#
#   GET  /hello?n=X   "hello X"
#   POST /echo        the request body
#   GET  /slow?s=F    "slow F", after F seconds (for Timeout)
#   GET  /bytes?n=N   N bytes, "0123456789" repeated
#   GET  /gather?group=G&n=N
#                     answers "gathered N" once N requests of group G are
#                     in, each held until then; "only K of N" after 5 s:
#                     proof that a client had N requests in flight at once
require "webrick"
require "logger"

server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0, Logger: WEBrick::Log.new(File::NULL), AccessLog: [],
                                 DoNotReverseLookup: true, MaxClients: 500)
server.mount_proc("/hello") { |req, res| res.body = "hello #{req.query['n']}" }
server.mount_proc("/echo") { |req, res| res.body = req.body.to_s }
server.mount_proc("/slow") do |req, res|
  seconds = Float(req.query.fetch("s", "1"))
  sleep seconds
  res.body = "slow #{req.query['s']}"
end
server.mount_proc("/bytes") { |req, res| res.body = ("0123456789" * (Integer(req.query["n"]) / 10 + 1))[0, Integer(req.query["n"])] }
groups = Hash.new(0)
lock = Mutex.new
arrived = ConditionVariable.new
server.mount_proc("/gather") do |req, res|
  group = req.query.fetch("group")
  count = Integer(req.query.fetch("n"))
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
  res.body = lock.synchronize do
    groups[group] += 1
    arrived.broadcast
    while groups[group] < count
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      break if left <= 0

      arrived.wait(lock, left)
    end
    groups[group] >= count ? "gathered #{count}" : "only #{groups[group]} of #{count}"
  end
end
Thread.new do
  $stdin.read
  server.shutdown
end
$stdout.puts server.listeners.first.addr[1]
$stdout.flush
server.start
