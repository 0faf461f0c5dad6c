# frozen_string_literal: true

module Farce
  # A bounded pool of Ruby threads that runs work a fiber must not do on the
  # loop's thread: Ruby 3.4's blocking_operation_wait (zlib, close(2), ...)
  # and io_pread/io_pwrite. The worker threads have no fiber scheduler, so
  # the work blocks them with the GVL released while the loop runs other
  # fibers; the submitting fiber parks on a Thread::Queue (block/unblock).
  #
  # Threads start on demand up to `size`; at most `queue_size` jobs wait for
  # a free thread (a fiber submitting beyond that parks until there is room).
  #
  # Once submitted, a job always runs to its end and the submitting fiber
  # waits for it: the work may write to memory on that fiber's stack (Ruby
  # hands blocking_operation_wait a function and its arguments, io_pread a
  # buffer over the caller's memory). An exception raised into the waiting
  # fiber (Timeout, Fiber#raise) is therefore held until the job finished,
  # then raised.
  class WorkerPool
    DEFAULT_SIZE = 4
    DEFAULT_QUEUE_SIZE = 64

    attr_reader :size, :queue_size

    def initialize(size: DEFAULT_SIZE, queue_size: DEFAULT_QUEUE_SIZE)
      raise ArgumentError, "worker pool size must be a positive Integer (got #{size.inspect})" unless size.is_a?(Integer) && size.positive?
      unless queue_size.is_a?(Integer) && queue_size.positive?
        raise ArgumentError, "worker queue size must be a positive Integer (got #{queue_size.inspect})"
      end

      @size = size
      @queue_size = queue_size
      @jobs = Thread::SizedQueue.new(queue_size)
      @threads = []
    end

    # One unit of work and its outcome.
    class Job
      def initialize(work)
        @work = work
        @fiber = Fiber.current # keeps the waiting fiber (and its stack) alive until the work is done
        @done = Thread::Queue.new
        @value = nil
        @error = nil
      end

      # On a worker thread.
      def perform
        @value = @work.call
      rescue Exception => e # rubocop:disable Lint/RescueException -- handed to the waiting fiber
        @error = e
      ensure
        @work = nil
        @done.push(true)
      end

      # In the submitting fiber: parks until the work is done; returns its
      # value or raises its exception.
      def wait
        held = nil
        done = false
        begin
          begin
            @done.pop
            done = true
          rescue Farce::Error
            # This fiber cannot park: a Fiber#raise resumed it inside the
            # raiser's turn (its exception is held already), or it was
            # resumed that way before it called #run. Parking again raised
            # this at once, and retrying it spun the thread until the work
            # was done and then raised this error in the first one's place.
            # It waits with the thread, as a blocking fiber does.
            wait_with_the_thread
            done = true
          rescue Exception => e # rubocop:disable Lint/RescueException -- see the class comment
            held ||= e
            retry
          end
        ensure
          # Fiber#kill (3.3+) is no exception: only ensure clauses see it.
          # The work may still use the caller's memory (io_pread's buffer,
          # which Ruby frees once the hook is left: Ruby 4.1 ends the
          # process when the worker's hold on it is still taken), so the
          # killed fiber waits here too before it goes.
          finish_killed unless done
        end
        @fiber = nil
        raise held if held
        raise @error if @error

        @value
      end

      private

      def finish_killed
        @done.pop
      rescue Farce::Error
        # This fiber cannot park: Fiber#kill resumed it inside the killer's
        # turn, and parking would return into #kill.
        wait_with_the_thread
      rescue Exception # rubocop:disable Lint/RescueException -- the kill goes on once the work is done
        retry
      end

      # As a blocking fiber waits: the thread sleeps (the work runs on a
      # worker thread and needs nothing from this one).
      def wait_with_the_thread
        return Fiber.blocking { @done.pop } if Fiber.respond_to?(:blocking)

        # Ruby 3.1 has no Fiber.blocking: the thread lets the others run
        # until the work is done
        Thread.pass while @done.empty?
        @done.pop
      end
    end

    # Runs work.call on a worker thread and returns its value (or raises its
    # exception). Without a usable pool (closed), runs it right here.
    def run(work)
      return work.call if @jobs.closed?

      job = Job.new(work)
      start_thread if @threads.size < @size && !idle_thread_for_another_job?
      begin
        @jobs.push(job)
      rescue ClosedQueueError
        return work.call
      end
      job.wait
    end

    # Worker threads alive now.
    def threads
      @threads.count(&:alive?)
    end

    # Lets queued jobs finish, then the threads end. Later #run calls run
    # their work inline.
    def close
      @jobs.close
      nil
    end

    def closed?
      @jobs.closed?
    end

    private

    # Whether a thread waits for a job already that no job queued before
    # this one will take. A thread woken by a push counts as waiting until
    # it runs and takes that job from the queue: two jobs submitted before
    # it ran (a fiber's write of a pipe, then another fiber's read of it)
    # both saw it waiting, no thread was started for the second, and it
    # queued behind the first for good while the write waited for the read.
    def idle_thread_for_another_job?
      @jobs.num_waiting > @jobs.size
    end

    def start_thread
      @threads.select!(&:alive?)
      jobs = @jobs
      thread = Thread.new do
        while (job = jobs.pop)
          job.perform
        end
      end
      thread.name = "farce-worker"
      thread.report_on_exception = false
      @threads << thread
    end
  end
end
