# frozen_string_literal: true

require "etc"

module Bench
  # The CPU time of every thread of a process group (real Falcon's controller
  # and workers), and which of a process's threads are the Go runtime's, for
  # bench/falcon_serve.rb's split of a worker's CPU.
  #
  # Which threads are Go's: farce loads its Go core with the asynchronous
  # signals blocked in the loading thread (ext/farce/core_access/core_signals.c,
  # docs/cgo-hazards.md), and Go starts every thread of its own with the mask
  # the runtime began with, so every Go thread blocks SIGINT, SIGTERM and the
  # rest; Ruby's threads inherit the main thread's mask, which blocks none of
  # them. So a thread whose SigBlk differs from its process's main thread's is
  # Go's. The obvious alternatives do not hold in a Falcon worker: every thread
  # there is named "ruby" (a thread inherits its creator's name, and Go names
  # none), and Go's threads start when the worker's first scheduler does,
  # moments after the fork that also starts Ruby's timer thread, so no moment
  # seen from outside divides the two. (bench/http_hello.rb names Ruby's threads
  # itself, before its scheduler starts; Falcon's worker cannot be asked to.)
  # An EPoll worker, which has no Go, must show none: the report prints the
  # count for both selectors.
  module GroupThreads
    module_function

    Task = Struct.new(:pid, :tid, :ns, :go, keyword_init: true)
    CLOCK_TICKS = Etc.sysconf(Etc::SC_CLK_TCK)

    # Every thread of every process in the group: pid, tid, CPU nanoseconds so
    # far, whether it is Go's; and the group's workers (processes whose parent
    # is in the group: the controller forked them).
    def sample(pgid, proc_root = "/proc")
      procs = Dir.children(proc_root).grep(/\A\d+\z/).filter_map do |pid|
        stat = File.read(File.join(proc_root, pid, "stat"))
        fields = stat.sub(/\A\d+ \(.*\) /m, "").split # after "pid (comm) ": state ppid pgrp ...
        [pid.to_i, fields[1].to_i] if fields[2].to_i == pgid
      rescue SystemCallError
        nil
      end
      members = procs.map(&:first)
      threads = procs.flat_map { |pid, _| threads_of(pid, proc_root) }
      { threads: threads, workers: procs.select { |_, ppid| members.include?(ppid) }.map(&:first) }
    end

    def threads_of(pid, proc_root)
      task = File.join(proc_root, pid.to_s, "task")
      masks = Dir.children(task).to_h { |tid| [tid.to_i, signal_mask(File.join(task, tid))] }
      main = masks[pid]
      masks.filter_map do |tid, mask|
        ns = cpu_ns(File.join(task, tid.to_s))
        Task.new(pid: pid, tid: tid, ns: ns, go: !main.nil? && !mask.nil? && mask != main) if ns
      end
    rescue SystemCallError
      []
    end

    def signal_mask(dir)
      File.read(File.join(dir, "status"))[/^SigBlk:\s*(\h+)/, 1]
    rescue SystemCallError
      nil
    end

    # Run time in nanoseconds: schedstat's, or utime + stime from stat where
    # the kernel keeps no schedstat.
    def cpu_ns(dir)
      File.read(File.join(dir, "schedstat")).split[0].to_i
    rescue SystemCallError
      begin
        fields = File.read(File.join(dir, "stat")).sub(/\A.*\) /m, "").split
        (fields[11].to_i + fields[12].to_i) * (1_000_000_000 / CLOCK_TICKS)
      rescue SystemCallError
        nil
      end
    end

    # The workers' CPU between two samples, in nanoseconds: all of it, and the
    # part on Go's threads (a thread that began between them counts from zero).
    def workers_cpu(before, after)
      was = before[:threads].to_h { |t| [t.tid, t.ns] }
      mine = after[:threads].select { |t| after[:workers].include?(t.pid) }
      spent = ->(list) { list.sum { |t| [t.ns - was.fetch(t.tid, 0), 0].max } }
      { all: spent.call(mine), go: spent.call(mine.select(&:go)), go_threads: mine.count(&:go) }
    end
  end
end
