# frozen_string_literal: true

# Async on IO::Event::Selector::Farce when its thread is killed with tasks
# parked in Mutex#lock, Thread::Queue#pop and sleep: Async stops (unwinds)
# its tasks itself, so they leave the Mutex's and the Queue's wait lists,
# and an unlock from another thread afterwards does not abort Ruby
# ("[BUG] unexpected THREAD_KILLED"). Run against the Farce selector and
# io-event's own choice (the same behaviour is Async's, not ours). In a
# child process: the bug aborts the process.
#
# Needs Async and io-event (.ci/sid-run ruby -Ilib -Itest test/io_event/test_async_unwind.rb).
require_relative "../test_helper"
require_relative "libraries"

ASYNC_UNWIND_MISSING = IOEventTestLibraries.missing("Async/io-event", "async", "io/event")

class TestAsyncUnwind < Minitest::Test
  def test_thread_kill_with_tasks_parked_in_mutex_queue_and_sleep
    skip ASYNC_UNWIND_MISSING if ASYNC_UNWIND_MISSING
    [["Farce", "Farce::IOEventSelector"], [nil, "IO::Event::Selector::"]].each do |selector, class_prefix|
      env = selector ? {"IO_EVENT_SELECTOR" => selector} : {}
      out, status = ruby_subprocess(<<~RUBY, timeout: 30, env: env)
        $stdout.sync = true
        Thread.report_on_exception = false
        require "async"
        require "farce/io_event"
        m = Mutex.new
        m.lock
        q = Thread::Queue.new
        ran = Thread::Queue.new
        parked = Thread::Queue.new
        t = Thread.new do
          Sync do |task|
            puts "selector=\#{Fiber.scheduler.instance_variable_get(:@selector).class}"
            task.async { begin; parked << 1; m.lock; ensure; ran << :mutex; end }
            task.async { begin; parked << 1; q.pop; ensure; ran << :queue; end }
            task.async { begin; parked << 1; sleep 30; ensure; ran << :sleep; end }
            sleep
          end
        end
        3.times { parked.pop }
        sleep 0.2 # the tasks reach their waits
        t.kill
        t.join
        m.unlock
        q << 1
        names = []
        names << ran.pop until ran.empty?
        puts "ran=\#{names.sort.inspect} locked=\#{m.locked?} queued=\#{q.size}"
      RUBY
      label = selector || "default"
      refute_match(/\[BUG\]|THREAD_KILLED/, out, label)
      assert status.success?, "#{label}: #{out}"
      assert_match(/selector=#{Regexp.escape(class_prefix)}/, out, label)
      assert_match(/ran=\[:mutex, :queue, :sleep\] locked=false queued=1/, out, label)
    end
  end
end
