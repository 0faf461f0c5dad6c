# frozen_string_literal: true

require "minitest/autorun"
require "json"
require "tmpdir"
# bench/ is part of a checkout, not of the test tree made beside an installed gem.
BENCH_RUNNER = File.expand_path("../bench/runner.rb", __dir__) unless defined?(BENCH_RUNNER)
require BENCH_RUNNER if File.exist?(BENCH_RUNNER)

# `rake bench` checks how farce's cost grows with connections against Async's
# (bench/runner/connection_targets.rb) and real Falcon against io-event's EPoll.
# Made-up runs and a made-up Falcon results file with known ratios go in; the
# verdicts come out, so that a target reported met or missed is computed from
# the figures, a ratio turned upside down fails here, and missing figures read
# "?" rather than passing.
class TestBenchConnectionTargets < Minitest::Test
  YJIT = "RUBY_YJIT_ENABLE=1"
  FARCE33 = "farce-epoll@3.3"
  ASYNC33 = "async@3.3"
  FARCE40J = "farce-epoll+#{YJIT}@4.0"
  ASYNC40J = "async-epoll+#{YJIT}@4.0"
  CONTENDERS = [FARCE33, ASYNC33, FARCE40J, ASYNC40J].freeze

  # [CPU µs per request, req/s] per count, the same in both runs.
  FIGURES = {
    FARCE33 => { 16 => [9, 60], 64 => [10, 50], 1000 => [16, 31], 10_000 => [30, 15] },
    ASYNC33 => { 16 => [10, 50], 64 => [12, 40], 1000 => [20, 30], 10_000 => [40, 12] },
    FARCE40J => { 16 => [9, 60], 64 => [8, 60], 1000 => [21, 30], 10_000 => [26, 20] },
    ASYNC40J => { 16 => [10, 50], 64 => [10, 50], 1000 => [20, 32], 10_000 => [40, 16] }
  }.freeze
  # the 10,000-idle pair's rate over the 0-idle rate (0.5 for a contender not named)
  IDLE = { FARCE33 => 0.40, ASYNC33 => 0.50, FARCE40J => 0.80, ASYNC40J => 0.70 }.freeze

  def setup
    skip "#{BENCH_RUNNER} is not here: no checkout of the repository" unless defined?(Bench::Runner)
  end

  def raw_runs(figures = FIGURES)
    raw = Hash.new { |h, k| h[k] = {} }
    figures.each do |c, by_count|
      by_count.each do |conns, (us, rate)|
        raw["http#{conns}"][c] = Array.new(2) do
          { "result" => { "cpu_us_per_request" => us, "requests_per_second" => rate, "connections_open" => conns, "window_s" => 4 } }
        end
      end
      raw["scale0"][c] = Array.new(2) { { "result" => { "round_trips_per_second" => 1000 } } }
      raw["scale10k"][c] = Array.new(2) { { "result" => { "round_trips_per_second" => 1000 * IDLE.fetch(c, 0.5) } } }
    end
    raw
  end

  def falcon_row(conns, ratio, cpu_ratio, p99, go_share)
    { "connections" => conns, "ratio" => ratio, "ratio_min" => ratio, "ratio_max" => ratio, "cpu_ratio" => cpu_ratio,
      "Farce" => { "latency_p99_ms" => p99[0], "go_share_pct" => go_share },
      "EPoll" => { "latency_p99_ms" => p99[1] } }
  end

  def verdicts(raw = raw_runs, contenders = CONTENDERS)
    runner = Bench::Runner.new
    runner.instance_variable_set(:@runs, 2)
    runner.instance_variable_set(:@raw, raw)
    Dir.mktmpdir do |dir|
      path = File.join(dir, "falcon_serve.json")
      File.write(path, JSON.generate("generated_at" => "2026-12-07T18:10:00Z", "layouts" => [
                                       { "name" => "pinned", "rows" => [falcon_row(64, 1.07, 0.91, [10, 12], 0.8)] },
                                       { "name" => "per-cpu", "rows" => [falcon_row(4000, 0.93, 1.0, [700, 2750], 1.78)] }
                                     ]))
      @lines = runner.connection_targets(contenders, runner.summarize(contenders), path)
      @lines.grep(/\A- /).to_h { |l| l.match(/\A- (\S+): (.+) — (.+)\z/).captures.values_at(1, 0, 2).then { |d, v, f| [d, [v, f]] } }
    end
  end

  def test_cpu_per_request_over_async_s_is_held_against_the_same_ratio_at_64
    v = verdicts
    # 3.3: 0.83× at 64; 0.80× at 1,000 and 0.75× at 10,000
    assert_equal ["met", "0.80× against 0.83×"], v["`#{FARCE33}`: CPU per request ÷ Async's at 1,000 conns ≤ the same at 64"]
    assert_equal ["met", "0.75× against 0.83×"], v["`#{FARCE33}`: CPU per request ÷ Async's at 10,000 conns ≤ the same at 64"]
    # 4.0 + YJIT: 0.80× at 64; 1.05× at 1,000
    assert_equal ["MISSED", "1.05× against 0.80×"], v["`#{FARCE40J}`: CPU per request ÷ Async's at 1,000 conns ≤ the same at 64"]
  end

  def test_every_http_row_and_the_idle_pair_are_against_async_on_the_same_ruby
    v = verdicts
    assert_equal ["met", "lowest 1.03× at 1,000 conns"], v["`#{FARCE33}`: every HTTP row ≥ 1.0× Async's req/s"]
    assert_equal ["MISSED", "lowest 0.94× at 1,000 conns"], v["`#{FARCE40J}`: every HTTP row ≥ 1.0× Async's req/s"]
    assert_equal %w[MISSED 0.80×], v["`#{FARCE33}`: 10,000 idle / 0 idle ≥ Async's"]
    assert_equal %w[met 1.14×], v["`#{FARCE40J}`: 10,000 idle / 0 idle ≥ Async's"]
  end

  def test_falcon_rows_are_checked_in_each_layout_and_go_s_share_where_a_worker_runs_per_cpu
    v = verdicts
    assert_equal %w[met 1.07×], v["Falcon, pinned, 64 conns: req/s ≥ 1.05× EPoll's"]
    assert_equal %w[met 0.91×], v["Falcon, pinned, 64 conns: CPU per request ≤ 0.95× EPoll's"]
    assert_equal ["met", "10.0 against 12.0 ms"], v["Falcon, pinned, 64 conns: p99 ≤ EPoll's"]
    assert_nil v["Falcon, pinned, 64 conns: Go threads < 1.0% of the workers' CPU"]
    assert_equal %w[MISSED 0.93×], v["Falcon, per-cpu, 4,000 conns: req/s ≥ 1.05× EPoll's"]
    assert_equal %w[MISSED 1.00×], v["Falcon, per-cpu, 4,000 conns: CPU per request ≤ 0.95× EPoll's"]
    assert_equal ["MISSED", "1.78%"], v["Falcon, per-cpu, 4,000 conns: Go threads < 1.0% of the workers' CPU"]
  end

  # The suite checks its targets before `rake bench` runs Falcon, so the Falcon lines say when
  # their figures were measured.
  def test_falcon_rows_say_when_falcon_ran
    verdicts
    header = @lines.index("Real Falcon, measured 2026-12-07 18:10 UTC:")
    refute_nil header, @lines.join("\n")
    assert_equal header + 2, @lines.index { |l| l.start_with?("- met: Falcon, pinned, 64 conns: req/s") }
  end

  # A contender run with a diagnostic setting (the tick off, say) is not farce as users run it.
  def test_diagnostic_variants_have_no_targets
    variant = "farce-epoll+FARCE_SCHED_TICK=0@3.3"
    v = verdicts(raw_runs(FIGURES.merge(variant => FIGURES[FARCE33])), CONTENDERS + [variant])
    assert_empty v.keys.grep(/FARCE_SCHED_TICK/)
    assert v.key?("`#{FARCE33}`: every HTTP row ≥ 1.0× Async's req/s")
  end

  def test_a_missed_target_points_at_the_profile
    verdicts
    assert_equal 1, @lines.count { |l| l.start_with?("A missed target is weighed against docs/benchmarks.md") }
  end

  def test_a_count_that_did_not_run_reads_unknown
    raw = raw_runs(FIGURES.transform_values { |by| by.reject { |conns, _| conns == 10_000 } })
    v = verdicts(raw)
    assert_equal ["?", "no data"], v["`#{FARCE33}`: CPU per request ÷ Async's at 10,000 conns ≤ the same at 64"]
    assert_equal ["met", "0.80× against 0.83×"], v["`#{FARCE33}`: CPU per request ÷ Async's at 1,000 conns ≤ the same at 64"]
  end
end
