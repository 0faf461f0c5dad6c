# frozen_string_literal: true

require_relative "spec_helper"

# The same contract against Async's scheduler: a second, independent
# implementation keeps the contract honest (an example only farce passes is
# probably testing farce, not Fiber::Scheduler). Async is optional.
async_unavailable =
  begin
    require "async"
    if !defined?(Async::Scheduler)
      "async #{Async::VERSION} has no Async::Scheduler (needs async 2.x)"
    elsif Async::Scheduler.respond_to?(:supported?) && !Async::Scheduler.supported?
      "Async::Scheduler.supported? is false on Ruby #{RUBY_VERSION}"
    end
  rescue LoadError => e
    "require \"async\" failed: #{e.message}"
  end

if async_unavailable
  warn "spec/async_scheduler_spec.rb: skipping the Async contract run: #{async_unavailable}"
  RSpec.describe "Async::Scheduler" do
    it "satisfies the Fiber::Scheduler contract" do
      skip async_unavailable
    end
  end
else
  ASYNC_DIFFERENCES = {
    pending: {
      # Async::Scheduler#fiber(...) is `async(...)`: the block gets the
      # Async::Task first, then Fiber.schedule's arguments.
      schedule_arguments: "the block receives the Async::Task before Fiber.schedule's arguments",
      # Async::Scheduler#fiber is `async(...).fiber`, and a finished task has
      # already dropped its fiber, so Fiber.schedule returns nil.
      schedule_returns_finished_fiber: "Fiber.schedule returns nil, not the Fiber, when the block finished without blocking"
    },
    skip: {
      # Async parks `sleep` (no duration) with a bare transfer to its loop.
      # Fiber#raise from another fiber transfers into the sleeper, which
      # rescues, finishes and returns to the thread's root fiber; the raising
      # fiber was transferred away from and is never resumed, so the run
      # hangs. Async wakes tasks with Task#stop instead.
      sleep_forever: "Fiber#raise on a fiber in Async's kernel_sleep(nil) strands the raising fiber (hangs)",
      # Async runs each Fiber.schedule block as an Async::Task, which rescues
      # the exception and logs it through Console; nothing propagates to the
      # code that scheduled or closed. Skipped rather than pending because the
      # log output would clutter every run.
      exception_before_block: "Async tasks log exceptions instead of raising them out of Fiber.schedule",
      exception_on_close: "Async tasks log exceptions instead of raising them out of Fiber.set_scheduler(nil)",
      exception_on_thread_exit: "Async tasks log exceptions instead of raising them at thread exit"
    }
  }.freeze

  RSpec.describe "Async::Scheduler (async #{Async::VERSION})" do
    # Async::Scheduler.new(parent = nil, selector: nil, ...): with no
    # arguments it builds its own io-event selector; Fiber.set_scheduler(nil)
    # calls its scheduler_close, which runs the loop to the end.
    it_behaves_like "a Fiber::Scheduler", -> { Async::Scheduler.new }, ASYNC_DIFFERENCES
  end
end
