# Child script of test_ruby_loop.rb: without the extension, every kind of wait runs on the Ruby
# core.
# Run by child_script (test_helper.rb), which defines its parameters first.
require "farce"
require "timeout"
s1 = Farce::Scheduler.new
s2 = Farce::Scheduler.new
puts "backend=#{s1.backend} loaded=#{Farce.core_loaded?}"
puts "reason=#{s2.fallback_reason}"
[s1, s2].each(&:close)
result = Farce.run do
  r, w = IO.pipe
  q = Queue.new
  Thread.new { sleep 0.02; q << :from_thread }
  results = []
  Fiber.schedule { results << r.read(3) }
  Fiber.schedule { sleep 0.01; w.write("abc") }
  Fiber.schedule { results << q.pop }
  Fiber.schedule { results << (Timeout.timeout(0.01) { sleep 1 } rescue :timed_out) }
  Fiber.schedule { pid = spawn("true"); results << Process.wait2(pid)[1].success? }
  Fiber.schedule { results << Addrinfo.getaddrinfo("localhost", 80).any? }
  if RUBY_VERSION >= "3.2"
    Fiber.schedule { a, b = IO.pipe; b.write("x"); results << IO.select([a], nil, nil, 1)[0].size }
  else
    results << 1
  end
  if RUBY_VERSION >= "3.3"
    File.write("/tmp/farce-ruby-loop-pread-#{$$}", "hello")
    File.open("/tmp/farce-ruby-loop-pread-#{$$}") do |f|
      Fiber.schedule { results << f.pread(4, 1) }
    end
    File.delete("/tmp/farce-ruby-loop-pread-#{$$}")
  else
    results << "ello"
  end
  # every wait above has its result before the block returns (spawn and
  # getaddrinfo take longer than 0.1 s under qemu-user emulation)
  100.times { break if results.size >= 7; sleep 0.1 }
  results.map(&:to_s).sort.join(",")
end
puts "results=#{result}"
begin
  Farce::Scheduler.new(backend: :epoll)
rescue Farce::Error => e
  puts "epoll: #{e.message[/needs farce's native core/]}"
end
