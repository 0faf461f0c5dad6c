# frozen_string_literal: true

require "minitest/autorun"
BENCH_LIB = File.expand_path("../bench/lib", __dir__) unless defined?(BENCH_LIB)
require File.join(BENCH_LIB, "steady_window") if File.directory?(BENCH_LIB)

# The steady part of a benchmark's wrk run (bench/lib/steady_window.rb) and the
# kernel's counts it is marked out by (bench/lib/tcp_census.rb): the ss output
# the counts are read from, and the window over counts and a clock the test sets,
# so that where the window opens and closes, and what it reports when it
# cannot open, is checked without a server or a timing.
class TestBenchSteadyWindow < Minitest::Test
  def setup
    skip "#{BENCH_LIB} is not here: no checkout of the repository" unless defined?(Bench::SteadyWindow)
  end

  # ss -Htin: a line per socket, its tcp_info indented under it.
  SS = <<~TXT
    0      0      127.0.0.1:8080 127.0.0.1:54178
    \t cubic wscale:7,7 rto:204 bytes_received:400 segs_out:14 segs_in:14 data_segs_out:12 data_segs_in:10 send 1bps
    0      0      127.0.0.1:8080 127.0.0.1:54180
    \t cubic wscale:7,7 rto:204 bytes_received:40 segs_out:2 segs_in:3 data_segs_out:1 data_segs_in:1 send 1bps
    ESTAB  0      0      127.0.0.1:8080 127.0.0.1:54182
    \t cubic wscale:7,7 rto:204 segs_out:1 segs_in:2 send 1bps
  TXT

  def test_a_look_counts_the_sockets_and_sums_the_segments_they_received
    look = Bench::TcpCensus.parse(SS)
    assert_equal 3, look.connections
    assert_equal 11, look.segments_in
    assert_equal 0, Bench::TcpCensus.parse("").connections
  end

  # A census that answers from a list of [connections, segments] looks, one a
  # call (the last repeats); nil for no ss.
  class Census
    def initialize(*looks)
      @looks = looks
    end

    def look(_port)
      look = @looks.size > 1 ? @looks.shift : @looks.first
      look && Bench::TcpCensus::Look.new(*look)
    end
  end

  # A wrk run whose join moves the test's clock instead of waiting.
  class Run
    def initialize(clock, ends_at = Float::INFINITY)
      @clock = clock
      @ends_at = ends_at
    end

    def alive? = @clock[0] < @ends_at

    def join(seconds)
      @clock[0] += seconds
      nil
    end
  end

  POLL = Bench::SteadyWindow::POLL_S if defined?(Bench::SteadyWindow)
  SECONDS = 4.0

  def watch(census, seconds: SECONDS, ends_at: Float::INFINITY)
    clock = [0.0]
    samples = 0
    window = Bench::SteadyWindow.new(8080, 3, seconds, census: census, clock: -> { clock[0] }) { samples += 1 }
    [window.watch(Run.new(clock, ends_at), 0.0), samples]
  end

  def test_the_window_opens_when_every_connection_is_open_twice_and_closes_before_wrk_ends
    result, samples = watch(Census.new([0, 0], [2, 40], [3, 90], [3, 100], [3, 160]))
    assert_equal 2, samples
    assert_in_delta 3 * POLL, result.opened_s, 1e-9
    assert_in_delta SECONDS - 3 * POLL - Bench::SteadyWindow::END_MARGIN_S, result.seconds, 1e-9
    assert_equal 60, result.requests
    assert_equal [1, 2], [result.before, result.after]
    assert_equal [3, 3], result.open
  end

  # A look taken while connections are made may count some twice, or count
  # all N for a moment: one look at N does not open the window.
  def test_one_look_at_every_connection_is_not_enough
    result, samples = watch(Census.new([3, 50], [2, 60], [4, 70], [3, 80], [3, 100], [3, 130]))
    assert_equal 2, samples
    assert_in_delta 4 * POLL, result.opened_s, 1e-9
    assert_equal 30, result.requests
  end

  def test_connections_lost_in_the_window_show_in_the_count_at_its_end
    result, = watch(Census.new([3, 100], [3, 100], [2, 130]))
    assert_equal 30, result.requests
    assert_equal [3, 2], result.open
  end

  def test_no_window_when_wrk_never_holds_them_all_by_halfway
    result, samples = watch(Census.new([0, 0], [1, 10], [2, 20]))
    assert_nil result.requests
    assert_equal [2], result.open
    assert_equal 0, samples
  end

  def test_no_window_without_ss_or_once_wrk_has_ended
    result, = watch(Census.new(nil))
    assert_nil result.requests
    assert_nil result.open
    result, = watch(Census.new([3, 100], [3, 100], [3, 160]), ends_at: SECONDS / 2)
    assert_nil result.requests
    assert_equal [3], result.open
  end
end
