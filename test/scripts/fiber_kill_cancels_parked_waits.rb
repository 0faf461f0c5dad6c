# Child script of test_wait_stress.rb: Fiber#kill of a parked fiber cancels its wait, for each kind
# of wait (BACKEND: the backend under test).
# Run by child_script (test_helper.rb), which defines its parameters first.
require "farce"
$stdout.sync = true
%i[read write pop sleep timed_read].each do |kind|
  Farce.run(backend: BACKEND) do
    r, w = IO.pipe
    q = Queue.new
    if kind == :write
      begin
        loop { w.write_nonblock("f" * 65_536) }
      rescue IO::WaitWritable
        nil
      end
    end
    target = Fiber.schedule do
      case kind
      when :read then r.read(1)
      when :write then w.write("x" * 70_000)
      when :pop then q.pop
      when :sleep then sleep
      when :timed_read then r.wait_readable(30)
      end
    end
    target.kill
    # a read or write that is a completion operation (io_uring) ends
    # once the loop reaped its cancellation: one more iteration
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    sleep 0.001 while target.alive? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    stats = Fiber.scheduler.stats
    puts "#{kind}: alive=#{target.alive?} parked=#{stats[:parked_fibers]} pending=#{stats[:pending_waits]}"
    r.close
    w.close
  end
end
puts "done"
