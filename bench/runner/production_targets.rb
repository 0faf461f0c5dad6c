# frozen_string_literal: true

# The targets for where production runs (Ruby 4.0 with YJIT, against Async on io-event's
# native EPoll, and Ruby 3.3 as the headline's Ruby), checked on each run's same-run ratios.
# A missed target points at the profile in docs/benchmarks.md that says whether it is within
# reach of the scheduler at all.
module Bench
  class Runner
    # The hello server's req/s targets against Async (1.3× on 3.3, 1.6× on 4.0 with YJIT) are
    # retired: docs/benchmarks.md, "Where the server's CPU goes", puts them beyond what a
    # scheduler's share of a request allows. Its latency stays a target here, and how its cost
    # grows with connections is checked by connection_targets.rb.
    PRODUCTION_RUBIES = %w[3.3 4.0+yjit].freeze
    FLOOR_FRACTION = 0.9
    PROFILE_NOTE = "docs/benchmarks.md, \"Where the server's CPU goes\""

    def production_targets(contenders, references, summary)
      out = []
      check = lambda do |desc, value, ok, text|
        out << "- #{value.nil? ? '?' : ok ? 'met' : 'MISSED'}: #{desc} — #{value.nil? ? 'no data' : text}"
      end
      cell = ->(id, c) { summary.find { |r| r["id"] == id }&.dig("cells", c) }
      PRODUCTION_RUBIES.each do |key|
        farce = production_contender(key)
        next unless contenders.include?(farce) && reference_of(farce, contenders)

        %w[http64 http1000].each do |id|
          p99 = cell.call("#{id}p99", farce)&.dig("ratio")
          check.call("`#{farce}`: #{label_of(id)}, p99 ≤ Async's", p99, p99 && p99 <= 1.0, format("%.2f×", p99.to_f))
        end
      end
      runs = per_run(contenders + references)
      PRODUCTION_RUBIES.each do |key|
        farce = production_contender(key)
        floor = floor_of(farce)
        next unless contenders.include?(farce) && runs[floor]

        { "pp1" => "pipes", "ppsock1" => "socketpairs" }.each do |id, what|
          f = floor_fraction(runs, farce, floor, id)
          check.call("`#{farce}`: ping-pong over #{what} ≥ #{FLOOR_FRACTION} of the Ruby floor", f,
                     f && f >= FLOOR_FRACTION, format("%.2f", f.to_f))
        end
      end
      %w[farce-epoll@4.0 farce-epoll+RUBY_YJIT_ENABLE=1@4.0].each do |farce|
        next unless contenders.include?(farce) && contenders.include?("farce-epoll@3.3")

        r = same_run_ratio(runs, farce, "farce-epoll@3.3", "http1000", "requests_per_second")
        check.call("`#{farce}`: HTTP, 1,000 conns ≥ `farce-epoll@3.3`'s req/s", r, r && r >= 1.0, format("%.2f×", r.to_f))
      end
      out << "" << "A missed target is weighed against where the server's CPU goes in #{PROFILE_NOTE}." if out.any? { |l| l.include?("MISSED") }
      out
    end

    private

    def production_contender(key)
      ver, jit = key.split("+")
      jit ? "farce-epoll+#{YJIT}@#{ver}" : "farce-epoll@#{ver}"
    end

    def label_of(id)
      rows.find { |row| row.id == id }&.label || id
    end

    def floor_fraction(runs, contender, floor, id)
      same_run_ratio(runs, contender, floor, id, "round_trips_per_second")
    end

    # Median over runs of a ÷ b, each run's pair measured in that run.
    def same_run_ratio(runs, a, b, id, key)
      median(Array.new(@runs) do |i|
        x = runs[a]&.[](i)&.dig(id, key)
        y = runs[b]&.[](i)&.dig(id, key)
        x && y && y.positive? ? x.to_f / y : nil
      end)
    end
  end
end
