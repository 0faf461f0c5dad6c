# Child script of test_reliability.rb: a signal storm while fibers park in every kind of wait
# (BACKEND: the backend under test).
# Run by child_script (test_helper.rb), which defines its parameters first.
require "farce"
require "timeout"
counts = Hash.new(0)
%w[INT TERM USR1].each { |sig| Signal.trap(sig) { counts[sig] += 1 } }
sent = 0
results = {}
Farce.run(backend: BACKEND) do
  r, w = IO.pipe
  q = Queue.new
  m = Mutex.new
  cv = ConditionVariable.new
  flag = false
  Fiber.schedule { results[:io] = r.read(5) }
  Fiber.schedule { sleep 0.3; results[:sleep] = true }
  Fiber.schedule { results[:queue] = q.pop }
  Fiber.schedule { m.synchronize { cv.wait(m) until flag; results[:cv] = true } }
  Fiber.schedule { results[:wait] = Process.wait2(Process.spawn("sleep", "0.2"))[1].success? }
  Fiber.schedule do
    Timeout.timeout(0.1) { sleep 5 }
  rescue Timeout::Error
    results[:timeout] = true
  end
  storm = Thread.new do
    300.times do |i|
      Process.kill(%w[INT TERM USR1][i % 3], Process.pid)
      sent += 1
      sleep 0.001
    end
  end
  storm.join
  w.write("hello")
  q << :item
  m.synchronize { flag = true; cv.signal }
end
sleep 0.05 # let the last traps run
puts "sent=#{sent} trapped=#{counts.values.sum} results=#{results.sort.to_h}"
