# frozen_string_literal: true

# Reading and comparing the per-test reports that sus_report.rb writes, for
# rake test:peers. Pure Ruby, no sus needed (test/test_peer_suite_comparison.rb
# checks it from a clone alone).
module PeerResults
  # One test as a run saw it. status: "passed", "failed", "errored",
  # "skipped", "hung" (started, never ended: the run was killed while it ran)
  # or "not run" (in the other run only).
  Test = Struct.new(:key, :name, :status, :seconds, :detail) do
    def passed? = status == "passed"
    def bad? = !%w[passed skipped].include?(status)

    def describe
      text = name == key ? "#{key}: #{status}" : "#{name} (#{key}): #{status}"
      text += " after #{seconds.round(1)} s" if seconds && %w[failed errored hung].include?(status)
      text += ": #{detail}" unless detail.to_s.empty?
      text
    end
  end

  # A run of one suite under one selector. summary: sus's own totals line,
  # nil when the run did not reach it (hung, killed, crashed).
  Run = Struct.new(:label, :tests, :summary, :exit_status, :note, :seconds) do
    def completed? = !summary.nil?
  end

  module_function

  # Parses a report file into {key => Test}. A test with a start line and no
  # end line was running when the run stopped: "hung".
  def parse(text)
    tests = {}
    text.each_line do |line|
      kind, key, *rest = line.chomp.split("\t", -1)
      case kind
      when "start"
        tests[key] = Test.new(key, rest[0], "hung", nil, "")
      when "end"
        test = tests[key] ||= Test.new(key, key, nil, nil, "")
        test.status = rest[0]
        test.seconds = rest[1].to_f
        test.detail = rest[2].to_s
      end
    end
    tests
  end

  # sus's totals line ("408 passed 2 failed out of 410 total (1234 assertions)").
  def summary_line(output)
    output.lines.grep(/\d+ passed.* out of \d+ total/).last&.strip
  end

  # One run holding two selectors' tests (io-event's suite runs its shared
  # examples once per selector class in one process): the tests whose key
  # names `from` (":Farce:") become a run keyed as if they were `to`'s
  # (":EPoll:"), so the two compare like two runs; tests of neither stay in both.
  def split(tests, farce:, epoll:, others:)
    farce_tests = {}
    epoll_tests = {}
    tests.each do |key, test|
      if key.include?(":#{farce}:")
        farce_tests[key.sub(":#{farce}:", ":#{epoll}:")] = test # keeps its own key, for the listing
      elsif key.include?(":#{epoll}:")
        epoll_tests[key] = test
      elsif others.none? { |o| key.include?(":#{o}:") }
        farce_tests[key] = epoll_tests[key] = test
      end
    end
    [farce_tests, epoll_tests]
  end

  # The comparison that decides: a test that passes under EPoll and does not
  # pass under Farce (failed, errored, hung, never run) is farce's failure.
  # The rest is listed: failing under both (version skew between the suites
  # and the installed Async/io-event, or the environment), passing under
  # Farce only, skipped under one only.
  # Each list is named after where the tests fail: farce_only and
  # epoll_only hold Tests (the failing side's), both and skip_differs hold
  # [farce_test, epoll_test] pairs.
  Comparison = Struct.new(:farce_only, :both, :epoll_only, :skip_differs) do
    def ok? = farce_only.empty?
  end

  # "76 passed, 3 failed, 1 skipped": a run's tests by status.
  def counts(tests)
    by = tests.values.group_by(&:status).transform_values(&:size)
    %w[passed failed errored hung skipped].filter_map { |s| "#{by[s]} #{s}" if by[s] }.join(", ")
  end

  def compare(farce, epoll)
    farce_only = []
    both = []
    epoll_only = []
    skip_differs = []
    (epoll.keys | farce.keys).each do |key|
      e = epoll[key]
      f = farce[key]
      e_status = e&.status || "not run"
      f_status = f&.status || "not run"
      f ||= Test.new(key, e.name, "not run", nil, "")
      if e_status == "passed"
        if f_status == "skipped" then skip_differs << [f, e]
        elsif f_status != "passed" then farce_only << f
        end
      elsif f_status == "passed"
        epoll_only << (e || Test.new(key, f.name, "not run", nil, "")) unless e_status == "skipped"
        skip_differs << [f, e] if e_status == "skipped"
      elsif e_status == "skipped" || f_status == "skipped"
        skip_differs << [f, e] unless e_status == f_status
      elsif e_status != "not run"
        both << [f, e]
      end
    end
    Comparison.new(farce_only, both, epoll_only, skip_differs)
  end
end
