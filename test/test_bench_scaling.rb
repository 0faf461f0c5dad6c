# frozen_string_literal: true

require "minitest/autorun"
require "json"
require "tmpdir"
# bench/ is part of a checkout, not of the test tree made beside an installed gem.
BENCH_RUNNER = File.expand_path("../bench/runner.rb", __dir__) unless defined?(BENCH_RUNNER)
require BENCH_RUNNER if File.exist?(BENCH_RUNNER)

# The scaling rows of `rake bench` (bench/runner/scaling.rb): which cases and
# contenders they are, and the table made of them. Made-up runs with known
# figures go in; the table's cells, the cases each contender ran and the rows'
# ids come out, so that a row renamed or a ratio turned upside down fails here
# rather than in a README read weeks later.
class TestBenchScaling < Minitest::Test
  YJIT = "RUBY_YJIT_ENABLE=1"
  FARCE33 = "farce-epoll@3.3"
  ASYNC33 = "async@3.3"
  FARCE40J = "farce-epoll+#{YJIT}@4.0"
  ASYNC40J = "async-epoll+#{YJIT}@4.0"
  # what a full run with the peers' folder has (bench/README.md's contenders, in part)
  FULL = [FARCE33, ASYNC33, "farce-epoll@3.1", "farce-io_uring@3.3", "farce-epoll@4.0", "async-epoll@4.0",
          FARCE40J, ASYNC40J, "farce-ruby@3.3"].freeze

  def setup
    skip "#{BENCH_RUNNER} is not here: no checkout of the repository" unless defined?(Bench::Runner)
    @env = ENV.to_h.slice("BENCH_ONLY", "BENCH_CONTENDERS", "BENCH_QUICK")
    %w[BENCH_ONLY BENCH_CONTENDERS BENCH_QUICK].each { |k| ENV.delete(k) }
  end

  def teardown
    %w[BENCH_ONLY BENCH_CONTENDERS BENCH_QUICK].each { |k| ENV.delete(k) }
    ENV.update(@env) if @env
  end

  def runner(runs = 2)
    r = Bench::Runner.new
    r.instance_variable_set(:@runs, runs)
    r
  end

  # The rows the README had before the scaling counts keep their ids and labels
  # (an old README compares row by row), in the main table.
  def test_the_rows_of_64_and_1000_connections_keep_their_ids_and_labels
    main = runner.rows.reject(&:section).to_h { |row| [row.id, row.label] }
    { "http64" => "HTTP, 64 conns", "http64us" => "HTTP, 64 conns: server's CPU per request",
      "http64p99" => "HTTP, 64 conns, p99", "http64gous" => "HTTP, 64 conns: Go threads' CPU per request",
      "http1000" => "HTTP, 1,000 conns", "http1000us" => "HTTP, 1,000 conns: server's CPU per request",
      "http1000max" => "HTTP, 1,000 conns, max", "http1000wrk" => "HTTP, 1,000 conns: wrk's CPU (near 100: wrk set the rate)",
      "scaleratio" => "10,000 idle / 0 idle" }.each do |id, label|
      assert_equal label, main[id], id
    end
    scaling = runner.rows.select(&:section).map(&:id)
    assert_includes scaling, "http10000us"
    assert_includes scaling, "http16"
    refute_includes scaling, "http64us"
  end

  def test_bench_only_scaling_is_the_http_counts_and_the_idle_pair
    ENV["BENCH_ONLY"] = "scaling"
    kases = runner.cases
    assert_equal %w[http16 http64 http256 http1000 http4000 http10000 scale0 scale10k], kases.map(&:id)
    assert_equal [10_000, 4], kases.find { |k| k.id == "http10000" }.args.values_at(:connections, :warmup)
    assert_equal %w[http16 http256 http4000 http10000], kases.select { |k| k.only == :scaling }.map(&:id)
    assert runner.scaling_only?
  end

  def test_the_scaling_contenders_are_farce_and_async_on_3_3_and_on_4_0_with_yjit
    assert_equal [FARCE33, ASYNC33, FARCE40J, ASYNC40J], runner.scaling_contenders(FULL)
    ENV["BENCH_CONTENDERS"] = "farce-epoll@3.1,farce-epoll@4.0"
    assert_equal %w[farce-epoll@3.1 farce-epoll@4.0], runner.scaling_contenders(%w[farce-epoll@3.1 farce-epoll@4.0])
  end

  # In a full run every contender runs 64 and 1,000 connections, and only the
  # scaling contenders run the other counts.
  def test_a_full_run_gives_the_other_counts_to_the_scaling_contenders_only
    r = runner(1)
    ran = Hash.new { |h, k| h[k] = [] }
    r.define_singleton_method(:run_http) { |kase, contender, _label| ran[kase.id] << contender; {} }
    r.define_singleton_method(:progress) { |*| nil }
    ENV["BENCH_ONLY"] = "http16,http64"
    r.run_all(FULL, r.cases)
    assert_equal [FARCE33, ASYNC33, FARCE40J, ASYNC40J], ran["http16"]
    assert_equal FULL, ran["http64"]
  end

  # CPU per request (µs) and req/s per count, two runs each.
  FIGURES = {
    FARCE33 => { 16 => [[12.0, 50_000], [14.0, 48_000]], 10_000 => [[40.0, 20_000], [44.0, 19_000]] },
    ASYNC33 => { 16 => [[16.0, 40_000], [16.0, 40_000]], 10_000 => [[40.0, 16_000], [40.0, 20_000]] },
    FARCE40J => { 16 => [[10.0, 60_000], [10.0, 60_000]] },
    ASYNC40J => { 16 => [[20.0, 30_000], [20.0, 30_000]] }
  }.freeze

  def scaling_raw
    raw = Hash.new { |h, k| h[k] = {} }
    FIGURES.each do |c, by_count|
      by_count.each do |conns, runs|
        raw["http#{conns}"][c] = runs.each_with_index.map do |(us, rate), i|
          open = c == FARCE33 && conns == 10_000 && i == 1 ? 9_500 : conns
          gcs = c == FARCE33 ? 1.5 + i : 0.75 # farce's two runs collect 1.5 and 2.5 times per 1,000 requests
          { "result" => { "cpu_us_per_request" => us, "requests_per_second" => rate, "connections_open" => open,
                          "errors" => c == ASYNC33 && conns == 10_000 ? 3 : 0,
                          "window_s" => c == ASYNC33 && conns == 10_000 && i.zero? ? nil : 4.2,
                          "gc_per_1k_requests" => gcs } }
        end
      end
    end
    { FARCE33 => [0.40, 0.50], ASYNC33 => [0.50, 0.50] }.each do |c, ratios|
      raw["scale0"][c] = Array.new(2) { { "result" => { "round_trips_per_second" => 1000 } } }
      raw["scale10k"][c] = ratios.map { |f| { "result" => { "round_trips_per_second" => 1000 * f } } }
    end
    raw
  end

  def scaling_table
    r = runner
    r.instance_variable_set(:@raw, scaling_raw)
    contenders = [FARCE33, ASYNC33, FARCE40J, ASYNC40J]
    [r, contenders, r.summarize(contenders)]
  end

  def test_the_scaling_table_gives_medians_same_run_ratios_the_fewest_open_and_every_error
    r, contenders, summary = scaling_table
    lines = r.scaling_lines(contenders, summary)
    row = lines.find { |l| l.start_with?("| `#{FARCE33}`, `#{ASYNC33}` | 10,000 |") }
    refute_nil row, lines.join("\n")
    cells = row.split("|").map(&:strip)
    # CPU 42 against 40 (1.0 and 1.1: median 1.05), req/s 1.25 and 0.95 (median 1.10)
    assert_equal ["42", "40 †", "1.05×", "19,500", "18,000", "1.10×", "9,500 / 10,000", "0 / 6", "2 / 0.75"], cells[3..11]
    assert lines.any? { |l| l.start_with?("† in some run the CPU per request is over the whole run") }
    yjit = lines.find { |l| l.start_with?("| `#{FARCE40J}`, `#{ASYNC40J}` | 16 |") }
    assert_equal ["10", "20", "0.50×", "60,000", "30,000", "2.00×"], yjit.split("|").map(&:strip)[3..8]
    refute lines.any? { |l| l.include?("| 64 |") }, "a count with no figures has no row"
    assert_includes lines, "- 10,000 idle + one busy pair, its rate over the 0-idle rate: `#{FARCE33}` 0.45, `#{ASYNC33}` 0.5 (0.90×)"
  end

  def test_the_main_table_leaves_the_scaling_counts_to_the_scaling_table
    r, contenders, summary = scaling_table
    main = r.table_lines(contenders, summary).join("\n")
    refute_includes main, "HTTP, 10,000 conns"
    assert_includes main, "10,000 idle / 0 idle"
  end

  def test_no_scaling_figures_no_table
    r = runner
    r.instance_variable_set(:@raw, {})
    assert_empty r.scaling_lines([FARCE33, ASYNC33], r.summarize([FARCE33, ASYNC33]))
  end

  # The README's Falcon section reads both layouts of a new results file, and
  # the one layout of a file written before there were two.
  def test_the_falcon_section_draws_each_layout_and_reads_old_results
    row = ->(extra) { { "connections" => 1000, "ratio" => 0.95, "ratio_min" => 0.9, "ratio_max" => 1.01, "Farce" => farce_figures.merge(extra), "EPoll" => farce_figures } }
    Dir.mktmpdir do |dir|
      path = File.join(dir, "falcon_serve.json")
      File.write(path, JSON.generate("falcon" => "falcon-0.55.6", "rounds" => 3, "duration" => 5, "layouts" => [
                                       { "name" => "pinned", "workers" => 1, "server_pin" => "0", "wrk_pin" => "1",
                                         "rows" => [row.call("go_us_per_request" => 0.8, "go_share_pct" => 0.9)] },
                                       { "name" => "per-cpu", "workers" => 2, "server_pin" => nil, "wrk_pin" => nil,
                                         "rows" => [row.call("go_us_per_request" => 2.5, "go_share_pct" => 3.1,
                                                             "whole_run_rounds" => 1)] }
                                     ]))
      text = runner.falcon_lines(path).join("\n")
      assert_includes text, "pinned: 1 worker(s) (`-n 1`), the server on CPU(s) 0, wrk on CPU 1:"
      assert_includes text, "per-cpu: 2 worker(s) (`-n 2`), nothing pinned:"
      assert_includes text, "| 1,000 | 7,000 | 7,000 | 0.95× (0.90-1.01) |"
      assert_includes text, "| 80 µs † | 80 µs | — | 2.5 µs | 3.1% |"
      assert_equal 1, text.scan("† in some round the CPU per request is over the whole run").size
      File.write(path, JSON.generate("falcon" => "falcon-0.55.6", "workers" => 1, "rounds" => 3, "duration" => 10,
                                     "server_pin" => "0", "wrk_pin" => "1", "rows" => [row.call({})]))
      text = runner.falcon_lines(path).join("\n")
      assert_includes text, "pinned: 1 worker(s)"
      assert_includes text, "| — | — | 0 / 0 |"
    end
  end

  def farce_figures
    { "requests_per_second" => 7000, "latency_p99_ms" => 12.5, "cpu_us_per_request" => 80.0, "errors" => 0,
      "connections_open" => 1000 }
  end
end
