# frozen_string_literal: true

require "minitest/autorun"
require "tmpdir"
require "fileutils"
BENCH_LIB = File.expand_path("../bench/lib", __dir__) unless defined?(BENCH_LIB)
require File.join(BENCH_LIB, "group_threads") if File.directory?(BENCH_LIB)

# How bench/falcon_serve.rb splits real Falcon's workers' CPU into the Go
# runtime's threads and the rest (bench/lib/group_threads.rb), on a /proc made
# here: a controller, a worker with Ruby's two threads and two of Go's (which
# block the signals farce's core is loaded with), and a process of another
# group.
class TestBenchGroupThreads < Minitest::Test
  RUBY_MASK = "0000000000000000"
  GO_MASK = "fffffffc3bba7a27"

  def setup
    skip "#{BENCH_LIB} is not here: no checkout of the repository" unless defined?(Bench::GroupThreads)
    @proc = Dir.mktmpdir
  end

  def teardown
    FileUtils.rm_rf(@proc) if @proc
  end

  # pid (comm) state ppid pgrp ... utime (14th) stime (15th)
  def process(pid, ppid, pgrp, threads)
    dir = File.join(@proc, pid.to_s)
    FileUtils.mkdir_p(dir)
    File.write(File.join(dir, "stat"), "#{pid} (ruby (worker)) S #{ppid} #{pgrp} #{pgrp} 0 -1 0 0 0 0 0 1 1 0 0 20 0")
    threads.each do |tid, (mask, ns)|
      task = File.join(dir, "task", tid.to_s)
      FileUtils.mkdir_p(task)
      File.write(File.join(task, "status"), "Name:\truby\nSigQ:\t0/1\nSigPnd:\t0000000000000000\nSigBlk:\t#{mask}\nSigIgn:\t0\n")
      File.write(File.join(task, "schedstat"), "#{ns} 0 1\n")
    end
  end

  def group(worker_ns)
    FileUtils.rm_rf(Dir[File.join(@proc, "*")])
    process(100, 1, 100, 100 => [RUBY_MASK, 5_000], 110 => [RUBY_MASK, 10])
    process(101, 100, 100, 101 => [RUBY_MASK, worker_ns[0]], 102 => [RUBY_MASK, worker_ns[1]],
                           103 => [GO_MASK, worker_ns[2]], 104 => [GO_MASK, worker_ns[3]])
    process(200, 1, 200, 200 => [GO_MASK, 99_999])
    Bench::GroupThreads.sample(100, @proc)
  end

  def test_go_threads_are_those_whose_signal_mask_is_not_the_main_threads
    sample = group([1_000, 20, 300, 40])
    assert_equal [101], sample[:workers]
    assert_equal [103, 104], sample[:threads].select(&:go).map(&:tid).sort
    assert_equal [100, 101, 102, 103, 104, 110], sample[:threads].map(&:tid).sort
  end

  def test_the_workers_cpu_between_two_samples_and_gos_part_of_it
    before = group([1_000, 20, 300, 40])
    after = group([9_000, 20, 1_100, 240])
    split = Bench::GroupThreads.workers_cpu(before, after)
    assert_equal({ all: 8_000 + 800 + 200, go: 1_000, go_threads: 2 }, split)
  end
end
