# frozen_string_literal: true

module Farce
  # What a forked child does with the Farce scheduler it inherited.
  #
  # A child whose parent had started farce's Go runtime never calls that
  # runtime again: the parent's schedulers are inert in the child, and each
  # of their hooks raises Farce::Error. A child forked inside Farce.run (or
  # inside any fiber of a Farce scheduler) is still running in one of those
  # fibers, so without help every `puts`, `sleep` or `Queue#pop` in it would
  # raise. Ruby (3.1+) calls Process._fork for Kernel#fork, Process.fork and
  # IO.popen("-"); in the child this removes the inert scheduler from the
  # forking thread, so the child's code does plain blocking I/O, and
  # Farce.run or Farce::Scheduler.new in it get a fresh copy of the core.
  # The Ruby loop counts fork generations here too (RubyLoop.forked).
  module AfterFork
    def _fork
      pid = super
      if pid.zero?
        RubyLoop.forked
        Farce.__forget_inherited_scheduler
      end
      pid
    end
  end

  # The forking thread is the only thread of the child; only its scheduler
  # can be an inherited one.
  def self.__forget_inherited_scheduler
    scheduler = Fiber.scheduler
    return unless scheduler.is_a?(Farce::Scheduler) && scheduler.closed?

    Fiber.set_scheduler(nil) # closes the inert scheduler: C state only
  end
end

Process.singleton_class.prepend(Farce::AfterFork) if Process.respond_to?(:_fork)
