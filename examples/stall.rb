# frozen_string_literal: true

# Stall detection: which fiber holds the event loop, and where.
#
#   ruby -Ilib examples/stall.rb                    # a report through on_stall
#   FARCE_STALL_MS=50 ruby -Ilib examples/stall.rb  # ... and the default one-line warning
#
# A ticker should tick every 10 ms. One request handler computes for 300 ms
# without ever yielding (a JSON encode, a regexp, a tight loop...): every
# other fiber, the ticker included, waits. farce's watchdog notices while it
# happens, samples the handler's backtrace at that moment, and reports once
# the handler gives the loop back, with how long it held it.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "farce"

def slow_handler
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  n = 0
  n += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 0.3 # the stall: this line
  n
end

on_stall = lambda do |report|
  puts "stall: #{(report.duration * 1000).round} ms in #{report.fiber.inspect}"
  puts "  at #{report.location}"
  report.backtrace.first(4).each { |frame| puts "     #{frame}" }
end

stats = nil
# The environment's FARCE_STALL_MS, if set, wins (and its reports use the default warning).
options = ENV["FARCE_STALL_MS"] ? {} : { stall_threshold: 0.1, on_stall: on_stall }
Farce.run(**options) do
  ticks = 0
  ticker = Fiber.schedule { loop { sleep 0.01; ticks += 1 } }
  Fiber.schedule do
    sleep 0.05
    slow_handler
  end
  sleep 0.5
  puts "ticks in 0.5 s: #{ticks} (50 without the stall)"
  stats = Fiber.scheduler.stats
  ticker.raise(StopIteration) rescue nil # ends the ticker's loop
end
puts "stalls: #{stats[:stalls]}, load: #{(stats[:load] * 100).round}%, busy #{stats[:busy_seconds].round(2)} s, idle #{stats[:idle_seconds].round(2)} s"
