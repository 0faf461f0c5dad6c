# frozen_string_literal: true

require_relative "test_helper"

# Fork rules of DESIGN.md (rules 6 and 7). Every case runs in a child Ruby so
# that the test process's own Go runtime does not interfere.
class TestFork < Minitest::Test
  def test_require_starts_no_go_runtime_and_no_thread
    skip_on_ruby_core "never loads the Go library"
    out, status = ruby_subprocess(<<~RUBY)
      threads_before = Dir.children("/proc/self/task").size
      require "farce"
      threads_after = Dir.children("/proc/self/task").size
      maps = File.read("/proc/self/maps")
      puts "loaded=\#{Farce.core_loaded?} threads=\#{threads_after - threads_before} mapped=\#{maps.include?("libfarce_core")}"
      Farce::Scheduler.new.close
      puts "after_new loaded=\#{Farce.core_loaded?} mapped=\#{File.read("/proc/self/maps").include?("libfarce_core")}"
    RUBY
    assert status.success?, out
    assert_match(/loaded=false threads=0 mapped=false/, out)
    assert_match(/after_new loaded=true mapped=true/, out)
  end

  def test_workers_forked_from_a_master_that_only_required_farce
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      pids = 10.times.map do |i|
        fork do
          r = Farce.run do
            rd, wr = IO.pipe
            Fiber.schedule { sleep 0.01; wr.write("w\#{i}") }
            rd.read(1 + i.to_s.size)
          end
          exit!(r == "w\#{i}" ? 0 : 1)
        end
      end
      ok = pids.map { |pid| Process.wait2(pid)[1].success? }
      puts "workers ok: \#{ok.count(true)}/\#{ok.size}"
    RUBY
    assert status.success?, out
    assert_match(%r{workers ok: 10/10}, out)
  end

  def test_child_of_a_started_runtime_gets_an_inert_scheduler_and_a_clear_error
    skip_on_ruby_core "starts no Go runtime, so a child has nothing to refuse (test_ruby_core.rb covers its fork)"
    out, status = ruby_subprocess(<<~RUBY, timeout: 30)
      require "farce"
      parent = Farce::Scheduler.new
      r, w = IO.pipe
      pid = fork do
        r.close
        lines = []
        lines << "closed=\#{parent.closed?}"
        t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        fresh = Farce::Scheduler.new # the Go runtime cannot run here: the Ruby core says why
        lines << "new: \#{fresh.backend} \#{fresh.fallback_reason[/after fork/]}"
        fresh.close
        begin
          Farce::Scheduler.new(backend: :epoll)
          lines << "new epoll: no error"
        rescue Farce::Error => e
          lines << "new epoll: Farce::Error \#{e.message[/after fork/]}"
        end
        begin
          parent.stats
        rescue Farce::Error => e
          lines << "stats: Farce::Error"
        end
        fds = Dir.children("/proc/self/fd").size
        parent.close
        lines << "close kept descriptors=\#{Dir.children("/proc/self/fd").size == fds}"
        lines << "elapsed<1=\#{Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 1}"
        w.write(lines.join("\\n"))
        w.close
        exit!(0)
      end
      w.close
      puts r.read
      Process.wait(pid)
      puts "child exit \#{$?.exitstatus}"
      puts "parent still works: \#{parent.stats[:backend]}"
      parent.close
    RUBY
    assert status.success?, out
    assert_match(/closed=true/, out)
    assert_match(/new: ruby after fork/, out)
    assert_match(/new epoll: Farce::Error after fork/, out)
    assert_match(/stats: Farce::Error/, out)
    assert_match(/close kept descriptors=true/, out)
    assert_match(/elapsed<1=true/, out)
    assert_match(/child exit 0/, out)
    assert_match(/parent still works: (epoll|poll|io_uring)/, out)
  end
end
