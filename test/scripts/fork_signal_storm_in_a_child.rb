# Child script of test_fork.rb: a signal storm in a forked child runs every trap (WORKLOAD:
# test/support/fork_workload.rb).
# Run by child_script (test_helper.rb), which defines its parameters first.
require WORKLOAD
ForkWorkload.run("parent")
ready_r, ready_w = IO.pipe
report_r, report_w = IO.pipe
pid = fork do
  ready_r.close
  report_r.close
  counts = Hash.new(0)
  %i[USR1 USR2 HUP INT].each { |sig| trap(sig) { counts[sig] += 1 } }
  trap(:TERM) do
    report_w.write(counts.sort.map { |k, v| "#{k}=#{v}" }.join(" "))
    report_w.close
    exit!(0)
  end
  Farce.run(backend: ForkWorkload.backend) do
    # 500 self-signals, each sent only after the last trap ran.
    Thread.new do
      500.times do |i|
        Process.kill(:USR1, Process.pid)
        sleep 0.0005 until counts[:USR1] > i
      end
    end
    sleep 0.001 until counts[:USR1] == 500
    ready_w.write("ready")
    ready_w.close
    r, _w = IO.pipe
    Fiber.schedule { r.read } # parks the loop on a pipe forever
  end
end
ready_w.close
report_w.close
ready = ready_r.read
3000.times { |i| Process.kill(%i[USR2 HUP INT][i % 3], pid) }
sleep 0.2
Process.kill(:TERM, pid)
puts "ready=#{ready} report=#{report_r.read}"
puts "child exit #{Process.wait2(pid)[1].exitstatus}"
