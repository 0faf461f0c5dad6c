# frozen_string_literal: true

# What a forked child's first Farce scheduler costs when its parent had
# started farce's Go runtime (so the child loads a fresh copy of the core),
# against the same first scheduler in a child whose parent only required
# farce (the library itself is loaded, as in any first load):
#
#   ruby -Ilib bench/fork_cost.rb [children per case]
#
# For each case, medians over the children of: the time of the first
# Farce::Scheduler.new (copy + dlopen + Go runtime start + scheduler), the
# second one (no load), and what the first added to the child: threads,
# RSS, and memory private to the child (Private_Clean + Private_Dirty from
# /proc/self/smaps_rollup; the parent's pages shared copy-on-write are not
# counted). Generations 1-3 are a chain (each child forks the next). The
# last case keeps 4 siblings alive together and measures each one's private
# memory once all have loaded: they map the one copy their parent prepared.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "farce"

CHILDREN = Integer(ARGV[0] || 20)

def kb(field, file = "/proc/self/status")
  File.read(file)[/^#{field}:\s+(\d+) kB/, 1].to_i
end

def private_kb = kb("Private_Clean", "/proc/self/smaps_rollup") + kb("Private_Dirty", "/proc/self/smaps_rollup")
def threads = Dir.children("/proc/self/task").size
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

# Measures the first and second scheduler in this process.
def sample
  GC.start
  before = [threads, kb("VmRSS"), private_kb]
  t0 = now
  Farce::Scheduler.new.close
  first = now - t0
  after = [threads, kb("VmRSS"), private_kb]
  t1 = now
  Farce::Scheduler.new.close
  second = now - t1
  { first_ms: first * 1000, second_ms: second * 1000, threads: after[0] - before[0],
    rss_kb: after[1] - before[1], private_kb: after[2] - before[2], kind: Farce.core_info[:kind] }
end

# Runs the block in a child, returns what it wrote with Marshal.
def in_child
  r, w = IO.pipe
  pid = fork do
    r.close
    w.write(Marshal.dump(yield))
    w.close
    exit!(0)
  end
  w.close
  data = r.read
  Process.wait(pid)
  Marshal.load(data)
end

def median(values) = values.sort[values.size / 2]

def report(name, samples)
  kinds = samples.map { |s| s[:kind] }.tally.map { |k, n| "#{k}x#{n}" }.join(",")
  line = format("%-44s first %6.2f ms  second %6.3f ms  +%d threads  +%5d kB RSS  +%5d kB private  (%s)",
                name, median(samples.map { |s| s[:first_ms] }), median(samples.map { |s| s[:second_ms] }),
                median(samples.map { |s| s[:threads] }), median(samples.map { |s| s[:rss_kb] }),
                median(samples.map { |s| s[:private_kb] }), kinds)
  puts line
end

report("child of a parent that only required farce", CHILDREN.times.map { in_child { sample } })
parent = sample
puts format("%-44s first %6.2f ms  +%d threads  +%d kB RSS", "the parent's own first load", parent[:first_ms],
            parent[:threads], parent[:rss_kb])
# The parent prepares the copy its children share at its first fork.
def fork_ms
  t0 = now
  Process.wait(fork { exit!(0) })
  (now - t0) * 1000
end
first_fork = fork_ms
puts format("%-44s first fork %.2f ms, later forks %.2f ms (median)", "the parent's forks (the copy is made at the first)",
            first_fork, median(5.times.map { fork_ms }))
report("generation 1 (memfd copy)", CHILDREN.times.map { in_child { sample } })
ENV["FARCE_CORE_COPY"] = "tmpfile"
report("generation 1 (unlinked copy, FARCE_CORE_COPY=tmpfile)", CHILDREN.times.map { in_child { sample } })
ENV.delete("FARCE_CORE_COPY")
chains = CHILDREN.times.map do
  in_child do
    g1 = sample
    in_child do
      g2 = sample
      [g1, g2, in_child { sample }]
    end
  end
end
3.times { |g| report("generation #{g + 1} of a chain", chains.map { |c| c[g] }) }

# 4 siblings alive at once: each loads, then all measure once every one has.
def siblings_private(count)
  ready_r, ready_w = IO.pipe
  go_r, go_w = IO.pipe
  results = count.times.map do
    r, w = IO.pipe
    pid = fork do
      before = private_kb
      Farce::Scheduler.new.close
      ready_w.write("x")
      go_r.read(1)
      w.write(Marshal.dump(private_kb - before))
      exit!(0)
    end
    w.close
    [pid, r]
  end
  ready_r.read(count)
  go_w.write("g" * count)
  results.map do |pid, r|
    value = Marshal.load(r.read)
    Process.wait(pid)
    value
  end
end
puts format("%-44s +%d kB private each", "4 siblings alive together", median(siblings_private(4)))
