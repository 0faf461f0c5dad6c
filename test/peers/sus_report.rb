# frozen_string_literal: true

# Loaded into a `sus` run of a peer's own suite (rake test:peers does
# `ruby -r this_file /usr/bin/sus ...`), it writes one line per test to the
# file named by FARCE_SUS_REPORT, as the test starts and as it ends, so that:
#
# - two runs of the same suite (Farce and EPoll) compare test by test, by
#   sus's own identity key (file:line, with the shared example's unique name);
# - a run that hangs or dies still says which tests passed, which one was
#   running when it stopped, and which never ran;
# - a test that hangs can be interrupted: on SIGUSR2 (sent by the runner when
#   a test has run longer than its per-test limit) the test running in the
#   main thread gets a PeerTestTimeout raised into it, sus records it as an
#   error, and the suite goes on to the next test.
#
# Only sus's public structure is used (Sus::It#call, the assertions' passed,
# failed, errored and skipped lists); nothing of the suite itself is changed.
# Lines are tab-separated: "start\tKEY\tNAME" and "end\tKEY\tSTATUS\tSECONDS\tDETAIL".
require "sus"

module FarcePeerReport
  # Raised into a test that ran past its limit. A StandardError, so that sus
  # records the test as errored and carries on.
  class PeerTestTimeout < StandardError; end

  path = ENV.fetch("FARCE_SUS_REPORT")
  OUT = File.open(path, "a")
  OUT.sync = true
  SEEN = Hash.new(0)
  @current = nil

  class << self
    attr_accessor :current

    def write(*fields)
      OUT.write(fields.map { |f| f.to_s.gsub(/[\t\n]+/, " ") }.join("\t") + "\n")
    end

    # "X / a selector / #wakeup / doesn't block ...": the descriptions of a
    # test and its contexts, without the folder and file (the key has it).
    def full_name(klass)
      parts = []
      while klass.respond_to?(:description)
        parts.unshift(klass.description.to_s) if klass.description
        klass = klass.superclass
      end
      parts.reject { |p| p.start_with?("/") || p.end_with?(".rb") }.join(" / ")
    end

    # The first failure of a finished test, in one line.
    def detail(assertions)
      failures = assertions.each_failure.to_a
      failure = failures.find { |f| f.is_a?(Sus::Assertions::Error) } || failures.first
      case failure
      when nil then ""
      when Sus::Assertions::Error
        error = failure.error
        "#{error.class}: #{error.message.lines.first&.strip} (#{failure.identity&.to_s})"
      else
        "assertion failed at #{failure.identity&.to_s}"
      end
    rescue StandardError => e
      "(no detail: #{e.class})"
    end
  end

  module ItReport
    def call(assertions)
      key = identity.to_s
      FarcePeerReport::SEEN[key] += 1
      # Tests sus gives the same key (made in a loop on one line) stay apart.
      key = "#{key}##{FarcePeerReport::SEEN[key]}" if FarcePeerReport::SEEN[key] > 1
      FarcePeerReport.write("start", key, FarcePeerReport.full_name(self))
      lists = %i[passed failed errored skipped].to_h { |l| [l, assertions.public_send(l).size] }
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      FarcePeerReport.current = Thread.current
      begin
        super
      ensure
        FarcePeerReport.current = nil
        took = format("%.3f", Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
        grown = lists.select { |l, n| assertions.public_send(l).size > n }.keys
        status = if grown.include?(:errored) then "errored"
                 elsif grown.include?(:failed) then "failed"
                 elsif grown.include?(:skipped) then "skipped"
                 elsif grown.include?(:passed) then "passed"
                 else "deferred" # resolved later by sus; counted from its summary
                 end
        child = (assertions.errored.last if status == "errored") || (assertions.failed.last if status == "failed")
        FarcePeerReport.write("end", key, status, took, child ? FarcePeerReport.detail(child) : "")
      end
    end
  end
  Sus::It.prepend(ItReport)

  # The runner's "this test hangs": raise into the thread running it. A
  # signal handler runs on the main thread, which is the one sus runs tests on.
  Signal.trap("USR2") do
    thread = current
    write("interrupt", "", "SIGUSR2: test over its time limit")
    thread&.raise(PeerTestTimeout, "interrupted by the runner: over the per-test time limit")
  end
end
