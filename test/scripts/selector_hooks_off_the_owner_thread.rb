# Child script of test_cross_thread_use.rb: the selector's hooks called from a thread other than its
# loop's (FARCE_BACKEND names the backend).
# Run by child_script (test_helper.rb), which defines its parameters first.
require "farce"
$stdout.sync = true
sel = nil
r, w = IO.pipe
waiting = Queue.new
t = Thread.new do
  loop_fiber = Fiber.current
  sel = Farce::IOEventSelector.new(loop_fiber)
  Fiber.new { sel.io_wait(Fiber.current, r, IO::READABLE); loop_fiber.transfer }.transfer
  waiting << true
  sel.select(0.05) until sel.closed?
  :loop_ended
end
waiting.pop
results = {}
{ io_wait: -> { sel.io_wait(Fiber.current, r, IO::READABLE) },
  io_read: -> { sel.io_read(Fiber.current, r, IO::Buffer.new(4), 1, 0) } }.each do |name, call|
  call.call
  results[name] = "returned"
rescue Farce::Error
  results[name] = "Farce::Error"
rescue StandardError => e
  results[name] = e.class.name
end
sel.stats # allowed from any thread
sel.wakeup
sel.close
results[:loop] = t.join(5) ? t.value : "still running"
results[:closed] = sel.closed?
puts results.map { |k, v| "#{k}=#{v}" }.join(" ")
exit!(0)
