# frozen_string_literal: true

module Farce
  class RubyLoop
    # The Ruby loop's stats: the same keys as the native scheduler's #stats.

    def stats
      usable!
      @wakeups_kept = true # the wake-up latency histogram is kept from now on
      {
        backend: :ruby,
        fibers: @live_fibers,
        parked_fibers: @parked,
        pending_waits: @parked - @ready_waits,
        ready_waits: @ready_waits,
        timers: @timers.size,
        registered_descriptors: @io_waits.size,
        iterations: @iterations,
        completed_waits: @completed,
        goroutines: 0,
        completion_ops: false,
        completion_ops_submitted: 0,
        # system calls are not counted here (IO.select and Ruby's own IO)
        io_uring_enters: 0,
        driver_calls: nil,
        transfer_calls: nil,
        file_transfers_cached: @file_transfers_cached,
        file_transfers_offloaded: @file_transfers_offloaded,
        system_calls: nil,
        turn_budget: @turn_budget,
        turns_given: @turns_given,
        core_ticks: 0, # no Go core, no Go scheduler tick to move
        stall_threshold: @stall_threshold,
        stalls: @stalls,
        wakeups: @wakeups.count,
        wakeup_p50: @wakeups.percentile(0.50),
        wakeup_p90: @wakeups.percentile(0.90),
        wakeup_p99: @wakeups.percentile(0.99),
        wakeup_max: @wakeups.max
      }.merge(load_stats)
    end

    def load_stats
      total = monotonic - @created
      idle = [@idle, total].min
      { idle_seconds: idle, busy_seconds: total - idle, load: total.positive? ? (total - idle) / total : 0.0 }
    end
  end
end
