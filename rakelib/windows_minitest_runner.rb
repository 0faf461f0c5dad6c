# frozen_string_literal: true

# Runs farce's minitest files in one Windows Ruby under wine (each start of
# wine and Ruby costs seconds): `ruby windows_minitest_runner.rb PLAN -v`,
# PLAN a Ruby file defining WINDOWS_MINITEST_PLAN, each file's name mapped to
# the tests left out of it and why (rakelib/windows_minitest.rb). A test
# left out still runs, as a skip giving that reason, so the counts show it;
# a name the file does not define stops the run (the list would be stale).
#
# It prints "windows-minitest: FILE: CLASS CLASS" once a file is loaded and
# "windows-minitest-result: CLASS TEST SECONDS MARK" (MARK as minitest's: .
# passed, F, E, S) after each test, each a line of its own, so that the rake
# task can count by file whatever else the tests print.
load ARGV.shift
require "minitest"

module Minitest
  # Each test's outcome on one line.
  class WindowsResultLines < AbstractReporter
    def record(result)
      $stdout.puts "windows-minitest-result: #{result.klass} #{result.name} #{format('%.2f', result.time)} #{result.result_code}"
      $stdout.flush
    end
  end

  def self.plugin_windows_result_lines_init(_options)
    reporter << WindowsResultLines.new
  end
end
Minitest.extensions << "windows_result_lines"

WINDOWS_MINITEST_PLAN.each do |file, left_out|
  before = Minitest::Runnable.runnables.dup
  require File.expand_path("test/#{file}.rb")
  added = Minitest::Runnable.runnables - before
  puts "windows-minitest: #{file}: #{added.map(&:name).join(' ')}"
  left_out.each do |test, why|
    owner = added.find { |k| k.public_method_defined?(test, false) }
    abort "windows-minitest: #{file} defines no #{test} (left out on Windows: #{why})" unless owner

    owner.define_method(test) { skip "left out on Windows: #{why}" }
  end
end
# test_helper loaded minitest/autorun: it runs everything at exit with ARGV.
