# frozen_string_literal: true

# Ruby before 3.4 runs a require in the Ractor that calls it, and a library
# loaded there cannot define what every Ractor shares (its constants, its
# settings, its C extension's classes); Ruby 3.4 and later load every
# require in the main Ractor. Without this, the failure would be Ruby's
# generic isolation error from wherever the load first trips.
if defined?(Ractor) && !Ractor.current.equal?(Ractor.main)
  raise Ractor::UnsafeError,
        "farce: require it in the main Ractor before starting Ractors, because Ruby #{RUBY_VERSION} loads a " \
        "require in the Ractor that calls it, where farce cannot define what all Ractors share (Ruby 3.4 and " \
        "later load it in the main Ractor themselves)"
end

require_relative "farce/version"
require_relative "farce/ractors"
require_relative "farce/io_buffer_warning"
require_relative "farce/native"
require_relative "farce/scheduler"
require_relative "farce/fork"
require_relative "farce/reopen_notice"

# farce is a Fiber::Scheduler whose core (waits, timers, ready queue, kernel
# drivers) is written in Go.
#
#   Farce.run do
#     Fiber.schedule { sleep 1 }
#     Fiber.schedule { sleep 1 }
#   end # about one second
module Farce
  # Installs a scheduler on the current thread, runs the block in a fiber,
  # runs the event loop until every fiber finished, closes the scheduler and
  # returns the block's value. When the block or one of its fibers raises,
  # the fibers still parked are unwound (their ensure clauses run; see
  # Farce::Unwinding), the scheduler is freed, and the exception propagates.
  def self.run(**options, &block)
    raise ArgumentError, "Farce.run needs a block" unless block
    # A child forked inside a fiber runs on in that (non-blocking) fiber,
    # which Ruby made its root (the process exits when it ends), with no
    # scheduler left (lib/farce/fork.rb); the loop needs a blocking fiber.
    return Fiber.new(blocking: true) { run(**options, &block) }.resume if !Fiber.blocking? && Fiber.scheduler.nil?

    previous = Fiber.scheduler
    scheduler = Scheduler.new(**options)
    Fiber.set_scheduler(scheduler)
    result = nil
    finished = false
    begin
      Fiber.schedule { result = block.call }
      scheduler.run
      finished = true
    ensure
      # An exception, Thread#kill or throw is on its way out: the fibers
      # still parked are unwound, not run to their end as closing would.
      scheduler.abandon unless finished
      Fiber.set_scheduler(previous)
    end
    result
  end
end
