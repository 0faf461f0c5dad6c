# frozen_string_literal: true

# Loaded into Ruby's test harness by run.rb (-r): prints each test's result
# the moment the harness records it, as
#   \x1eClass#test pass|failure|error|skip\x1e
# (between ASCII record separators, which run.rb takes out of what it shows)
# so that run.rb keeps the results of the tests that ran before one that
# hung or crashed (the harness itself reports failures only at its end).
# Test::Unit::Runner#record is the harness's own hook for that (it names
# the suite, the method and the exception, nil when the test passed).
require "test/unit"

module RubyFiberRecord
  def record(suite, method, assertions, time, error, *rest)
    status = case error
             when nil then "pass"
             when Test::Unit::PendedError then "skip"
             when Test::Unit::AssertionFailedError then "failure"
             else "error"
             end
    $stdout.print("\x1e#{suite.name}##{method} #{status}\x1e")
    $stdout.flush
    super
  end
end
Test::Unit::Runner.prepend(RubyFiberRecord)
