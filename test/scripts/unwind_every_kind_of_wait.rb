# Child script of test_unwind.rb: fibers parked in every kind of wait are unwound and the block's
# exception wins (BACKEND is defined by each_backend_run).
# Run by child_script (test_helper.rb), which defines its parameters first.
q = Queue.new
m = Mutex.new
m.lock
cv_mutex = Mutex.new
cv = ConditionVariable.new
r, w = IO.pipe
ran = Queue.new
t = Thread.new do
  Farce.run(backend: BACKEND) do
    Fiber.schedule { begin; q.pop; ensure; ran << :queue; end }
    Fiber.schedule { begin; cv_mutex.synchronize { cv.wait(cv_mutex) }; ensure; ran << :cv; end }
    Fiber.schedule { begin; sleep 30; ensure; ran << :sleep; end }
    Fiber.schedule { begin; r.read(1); ensure; ran << :read; end }
    Fiber.schedule { begin; m.lock; ensure; ran << :mutex; end }
    Fiber.schedule { begin; sleep 30; ensure; raise ArgumentError, "from an ensure"; end }
    raise IOError, "the block's"
  end
end
begin
  t.join
rescue Exception => e
  puts "raised #{e.class}: #{e.message}"
end
names = []
names << ran.pop until ran.empty?
puts "ensures: #{names.sort.inspect}"
q << 1
m.unlock
cv_mutex.synchronize { cv.broadcast }
w.write("x")
puts "queue size #{q.size}, mutex locked #{m.locked?}, pipe #{r.read_nonblock(1)}"
