# frozen_string_literal: true

require "minitest/autorun"
require_relative "peers/results"

# rake test:peers decides from per-test reports of a peer's suite (written by
# test/peers/sus_report.rb) whether farce broke a test the peer's own
# selector passes. These check that decision from a clone alone, without sus
# or the suites: what counts against farce, and what is only listed.
class TestPeerSuiteComparison < Minitest::Test
  def report(*lines) = lines.map { |l| l.join("\t") + "\n" }.join

  def test_a_test_started_and_never_ended_is_hung
    tests = PeerResults.parse(report(%w[start a.rb:1 first], %w[end a.rb:1 passed 0.1], %w[start a.rb:2 second]))
    assert_equal "passed", tests["a.rb:1"].status
    assert_equal "hung", tests["a.rb:2"].status
    assert_equal "second", tests["a.rb:2"].name
  end

  def test_the_detail_of_a_failure_is_kept
    tests = PeerResults.parse(report(%w[start a.rb:1 t], ["end", "a.rb:1", "errored", "1.5", "Farce::Error: push called from"]))
    assert_equal "errored", tests["a.rb:1"].status
    assert_in_delta 1.5, tests["a.rb:1"].seconds
    assert_equal "Farce::Error: push called from", tests["a.rb:1"].detail
  end

  def run_of(statuses)
    statuses.to_h { |key, status| [key, PeerResults::Test.new(key, key, status, 0.0, "")] }
  end

  def test_passing_under_epoll_and_not_under_farce_counts_against_farce
    epoll = run_of("p" => "passed", "f" => "passed", "e" => "passed", "h" => "passed", "gone" => "passed")
    farce = run_of("p" => "passed", "f" => "failed", "e" => "errored", "h" => "hung")
    c = PeerResults.compare(farce, epoll)
    refute c.ok?
    assert_equal %w[f e h gone], c.farce_only.map(&:key)
    assert_equal "not run", c.farce_only.last.status # the Farce run died before it
  end

  def test_failing_under_both_is_listed_not_counted
    epoll = run_of("skew" => "errored", "net" => "failed", "ok" => "passed")
    farce = run_of("skew" => "errored", "net" => "hung", "ok" => "passed")
    c = PeerResults.compare(farce, epoll)
    assert c.ok?
    assert_equal %w[skew net], c.both.map { |f, _| f.key }
  end

  def test_passing_under_farce_only_and_skips_are_listed
    epoll = run_of("a" => "failed", "s" => "passed", "t" => "skipped")
    farce = run_of("a" => "passed", "s" => "skipped", "t" => "skipped")
    c = PeerResults.compare(farce, epoll)
    assert c.ok?
    assert_equal %w[a], c.epoll_only.map(&:key)
    assert_equal %w[s], c.skip_differs.map { |f, _| f.key }
  end

  # io-event's suite runs its shared examples once per selector class in
  # one process; the keys name the selector.
  def test_one_run_splits_into_farce_and_epoll_by_key
    tests = run_of("sel.rb:EPoll:9:1" => "passed", "sel.rb:Farce:9:1" => "failed", "sel.rb:Select:9:1" => "failed",
                   "sel.rb:5" => "errored")
    farce, epoll = PeerResults.split(tests, farce: "Farce", epoll: "EPoll", others: %w[Select])
    assert_equal ["sel.rb:EPoll:9:1", "sel.rb:5"], farce.keys
    assert_equal "sel.rb:Farce:9:1", farce["sel.rb:EPoll:9:1"].key # listed under its own name
    assert_equal ["sel.rb:EPoll:9:1", "sel.rb:5"], epoll.keys
    c = PeerResults.compare(farce, epoll)
    assert_equal ["sel.rb:Farce:9:1"], c.farce_only.map(&:key)
    assert_equal ["sel.rb:5"], c.both.map { |f, _| f.key }
  end

  def test_sus_summary_line
    out = "noise\n138 passed 2 failed 2 errored out of 142 total (390 assertions)\n🏁 Finished in 2.9s\n"
    assert_equal "138 passed 2 failed 2 errored out of 142 total (390 assertions)", PeerResults.summary_line(out)
    assert_nil PeerResults.summary_line("a run that was killed\n")
  end
end
