# frozen_string_literal: true

require_relative "tcp_census"

module Bench
  # The steady part of a measured wrk run. wrk opens its N connections when it
  # starts, so the first part of every run is the server accepting them (at
  # 10,000 connections, a good share of a 5 s run), and its last moments are
  # wrk stopping. The window runs from the moment the kernel holds all N
  # established at the server to shortly before wrk's end; the caller's
  # sampler (the server's CPU by thread, say) is read at both ends, and the
  # requests in between are the data segments the server's ends received
  # (TcpCensus), so that CPU per request counts the serving of requests and
  # nothing of the connections' setup. Where no window can be had (ss
  # missing, or wrk never held all N), the caller falls back on the whole run
  # and says so.
  class SteadyWindow
    POLL_S = 0.2 # how often the connections are counted until all are open
    END_MARGIN_S = 0.5 # the window closes this long before wrk's planned end

    Result = Struct.new(:seconds, :requests, :before, :after, :open, :opened_s, keyword_init: true)

    MONOTONIC = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }

    # port, the connections wrk was asked for, wrk's -d seconds, and a block
    # that samples what the caller measures. census and clock are the kernel's
    # counts and the time (a test passes its own).
    def initialize(port, connections, seconds, census: TcpCensus, clock: MONOTONIC, &sample)
      @port = port
      @connections = connections
      @seconds = seconds
      @sample = sample
      @census = census
      @clock = clock
    end

    def now = @clock.call

    # Watches the run while wrk_thread runs it (started: when wrk was
    # started); returns a Result, whose requests are nil when no window could
    # be had. Yields to the caller's progress block meanwhile.
    def watch(wrk_thread, started)
      closes = started + @seconds - END_MARGIN_S
      counted = []
      opening = nil
      # until all N are open in two looks in a row (a look taken while
      # connections are still being made may count one twice): the window may
      # open no later than halfway through
      while wrk_thread.alive? && now < started + @seconds / 2.0
        look = @census.look(@port)
        counted << look.connections if look
        if look && counted.last(2) == [@connections, @connections]
          opening = [now, @sample.call, look.segments_in]
          break
        end
        yield if block_given?
        wrk_thread.join(POLL_S)
      end
      wait(wrk_thread, closes) { yield if block_given? }
      return Result.new(open: counted.max && [counted.max]) unless opening && wrk_thread.alive?

      closing = [now, @sample.call, @census.look(@port)]
      return Result.new(open: [@connections]) unless closing[2]

      Result.new(seconds: closing[0] - opening[0], requests: closing[2].segments_in - opening[2], before: opening[1],
                 after: closing[1], open: [@connections, closing[2].connections], opened_s: opening[0] - started)
    end

    def wait(wrk_thread, until_time)
      while wrk_thread.alive? && now < until_time
        yield
        wrk_thread.join((until_time - now).clamp(0, 0.5))
      end
    end
  end
end
