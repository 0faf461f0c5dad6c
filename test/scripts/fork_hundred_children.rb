# Child script of test_fork.rb: a parent that ran Farce.run forks 100 children, each running the
# fiber workload (WORKLOAD: test/support/fork_workload.rb).
# Run by child_script (test_helper.rb), which defines its parameters first.
require WORKLOAD
ForkWorkload.run("parent")
copies = Hash.new(0)
failed = []
100.times.each_slice(10) do |slice|
  children = slice.map do |i|
    r, w = IO.pipe
    pid = fork do
      r.close
      info = ForkWorkload.run("child#{i}")
      w.write("#{info[:generation]} #{info[:kind]} #{info[:pid] == Process.pid}")
      exit!(0)
    rescue Exception => e
      w.write("error #{e.class}: #{e.message}")
      exit!(1)
    end
    w.close
    [pid, r]
  end
  children.each do |pid, r|
    report = r.read
    r.close
    status = Process.wait2(pid)[1]
    if status.success? && report.match?(/\A1 (memfd|tmpfile) true\z/)
      copies[report.split[1]] += 1
    else
      failed << "#{pid}: #{status.inspect} #{report}"
    end
  end
end
ForkWorkload.run("parent again")
puts "children ok: #{copies.values.sum}/100 copies=#{copies.inspect}"
puts failed.first(5)
