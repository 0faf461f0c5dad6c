# frozen_string_literal: true

require_relative "test_helper"

# Hooks called where no fiber can park (the thread's root fiber, a
# blocking fiber): the work is done with the thread, as without a
# scheduler, never by spinning with the GVL held; and calls into Go from
# deep stacks raise SystemStackError instead of faulting. Each case runs
# in a child process.
class TestBlockingFibers < Minitest::Test
  # The io_read hook called where no fiber can yield (the root
  # fiber) must not spin with the GVL held: another thread keeps running and
  # the read completes, done with the thread as without a scheduler.
  def test_io_read_hook_from_root_fiber_does_not_spin
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 20)
        require "farce"
        $stdout.sync = true
        #{OFFSET_DEFINITION}
        s = Farce::Scheduler.new(backend: :#{b})
        r, w = IO.pipe
        ticks = 0
        Thread.new { 10.times { sleep 0.1; ticks += 1 }; w.write("x") }
        begin
          n = s.io_read(r, IO::Buffer.new(8), 1, *OFFSET)
          puts "read \#{n} ticks=\#{ticks}"
        rescue StandardError => e
          puts "raised \#{e.class}: \#{e.message}"
        end
        exit!(0)
      RUBY
      assert status.success?, "#{b}: #{out}"
      # the chosen behaviour: the transfer is done with the thread (GVL
      # released), as Ruby does it without a scheduler
      assert_match(/read 1 ticks=10/, out, b)
    end
  end

  # Stack headroom before every Go call: deep recursion calling
  # scheduler methods that reach Go (new, stats, close) ends in
  # SystemStackError, never in a Go fault that kills the process.
  def test_go_calls_near_the_stack_limit_raise_system_stack_error
    each_backend do |b|
      out, status = ruby_subprocess(<<~RUBY, timeout: 60)
        require "farce"
        s = Farce::Scheduler.new(backend: :#{b})
        def deep(s, n, b)
          s.stats
          Farce::Scheduler.new(backend: b).close if n % 64 == 0
          deep(s, n + 1, b)
        end
        %w[main fiber].each do |where|
          run = lambda do
            deep(s, 0, :#{b})
          rescue SystemStackError
            puts "\#{where}: SystemStackError"
          end
          where == "main" ? run.call : Fiber.new(blocking: true, &run).resume
        end
        s.close
        puts "survived"
      RUBY
      assert status.success?, "#{b}: #{out} (#{status.inspect})"
      assert_match(/survived/, out, b)
    end
  end
end
