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
# counted). Generations 1-3 are a chain (each child forks the next).
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
