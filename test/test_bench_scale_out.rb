# frozen_string_literal: true

require "minitest/autorun"
require "json"
require "tmpdir"
# bench/ is part of a checkout, not of the test tree made beside an installed gem.
BENCH_RUNNER = File.expand_path("../bench/runner.rb", __dir__) unless defined?(BENCH_RUNNER)
require BENCH_RUNNER if File.exist?(BENCH_RUNNER)

# bench/scale_out.rb's table and the two ratios the scale-out target is read
# from, on a results file written by hand (the driver itself needs wrk and a
# Ruby whose Ractors farce runs in: `rake bench:scale_out`).
class TestBenchScaleOut < Minitest::Test
  DATA = {
    "generated_at" => "2026-12-06T23:00:00Z", "ruby" => "4.0.5", "rounds" => 3, "duration" => 5,
    "connections" => 128, "cpus" => 2, "backend" => nil,
    "rows" => [
      { "mode" => "ractors", "workers" => 1, "requests_per_second" => 30_000, "cpu_us_per_request" => 20.0, "rss_mib" => 30.0, "errors" => 0 },
      { "mode" => "ractors", "workers" => 2, "requests_per_second" => 51_000, "cpu_us_per_request" => 22.0, "rss_mib" => 33.0, "errors" => 0 },
      { "mode" => "processes", "workers" => 1, "requests_per_second" => 31_000, "cpu_us_per_request" => 19.0, "rss_mib" => 40.0, "errors" => 0 },
      { "mode" => "processes", "workers" => 2, "requests_per_second" => 60_000, "cpu_us_per_request" => 20.0, "rss_mib" => 66.0, "errors" => 2 }
    ]
  }.freeze

  def setup
    skip "#{BENCH_RUNNER} is not here: no checkout of the repository" unless defined?(Bench::ScaleOut)
  end

  def test_the_table_names_each_layout_and_gives_the_two_ratios
    table = Bench::ScaleOut.table(DATA)
    assert_includes table, "| 2 Ractors in one process | 51000 | 22.0 | 33.0 | 0 |"
    assert_includes table, "| 2 processes | 60000 | 20.0 | 66.0 | 2 |"
    assert_includes table, "2 Ractors ÷ 1 Ractor: 1.70× the req/s"
    assert_includes table, "2 Ractors ÷ 2 processes: 0.85× the req/s, 1.10× the CPU per request, 0.50× the memory"
  end

  def test_a_missing_layout_gives_no_ratio_instead_of_failing
    data = DATA.merge("rows" => DATA["rows"].reject { |r| r["mode"] == "processes" })
    assert_includes Bench::ScaleOut.table(data), "2 Ractors ÷ 2 processes: — the req/s"
  end

  def test_the_readme_section_reads_the_results_file_or_says_how_to_make_it
    runner = Bench::Runner.allocate
    Dir.mktmpdir do |dir|
      path = File.join(dir, "scale_out.json")
      assert_match(/No figures: `rake bench:scale_out`/, runner.scale_out_lines(path).join)
      File.write(path, JSON.generate(DATA))
      text = runner.scale_out_lines(path).join("\n")
      assert_includes text, "Ruby 4.0.5, 2 CPUs, measured on 2026-12-06 23:00 UTC"
      assert_includes text, "2 Ractors ÷ 1 Ractor: 1.70×"
    end
  end
end
