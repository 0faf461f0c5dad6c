# Child script of test_fork.rb: a child of a process whose Go runtime started gets an inert
# inherited scheduler and a fresh core.
# Run by child_script (test_helper.rb), which defines its parameters first.
require "farce"
parent = Farce::Scheduler.new
parent_info = Farce.core_info
r, w = IO.pipe
pid = fork do
  r.close
  lines = []
  lines << "closed=#{parent.closed?}"
  lines << "loaded_before_new=#{Farce.core_loaded?}"
  begin
    parent.stats
  rescue Farce::Error => e
    lines << "stats: Farce::Error #{e.message[/before fork/]}"
  end
  fds = Dir.children("/proc/self/fd").size
  parent.close
  lines << "close kept descriptors=#{Dir.children("/proc/self/fd").size == fds}"
  child = Farce::Scheduler.new
  lines << "new works: #{child.stats[:backend]}"
  info = Farce.core_info
  lines << "generation=#{info[:generation]} pid_is_child=#{info[:pid] == Process.pid} " \
           "copy=#{info[:kind]} runtimes=#{info[:runtimes_mapped]}"
  lines << "inherited still inert=#{parent.closed?}"
  child.close
  w.write(lines.join("\n"))
  w.close
  exit!(0)
end
w.close
puts r.read
Process.wait(pid)
puts "child exit #{$?.exitstatus}"
puts "parent: #{parent_info[:kind]} generation=#{parent_info[:generation]} still works: #{parent.stats[:backend]}"
parent.close
