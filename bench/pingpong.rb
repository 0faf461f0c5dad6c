# frozen_string_literal: true

# Pipe ping-pong on its own (the suite runs it through bench/runner.rb):
#   ruby bench/pingpong.rb farce|farce-poll|farce-epoll|threads|async [pairs] [seconds]
# The workload lives in bench/workloads.rb; prints one JSON line.
require "json"
require_relative "workloads"

contender = ARGV[0] || "farce"
harness = Bench::Harness.new(contender)
result = Bench::Workloads.pingpong(harness, pairs: ARGV[1] || 1, seconds: ARGV[2] || 2)
puts JSON.generate(contender: contender, ruby: RUBY_VERSION, pairs: result[:pairs],
                   round_trips_per_second: result[:round_trips_per_second])
