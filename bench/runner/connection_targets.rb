# frozen_string_literal: true

# The targets for cost as connections grow, checked on each run's same-run ratios: farce's CPU
# per request over Async's no higher at 1,000 and 10,000 connections than at 64 (the scaling
# pairs: Ruby 3.3, and 4.0 with YJIT), no HTTP row below Async's req/s, the 10,000-idle pair's
# rate over the 0-idle rate at least Async's, and real Falcon ahead of io-event's EPoll in both
# layouts (bench/results/falcon_serve.json) with Farce's Go threads under 1% of a worker's CPU
# where a worker runs per CPU.
module Bench
  class Runner
    # farce's CPU per request over Async's, at these counts, against the same at 64
    SCALING_CHECKED = [1000, 10_000].freeze
    FALCON_RATE = 1.05
    FALCON_CPU = 0.95
    FALCON_GO_SHARE_PCT = 1.0
    CONNECTIONS_NOTE = "docs/benchmarks.md, \"Cost against connections\" (what grows, and what is Ruby's)"

    def connection_targets(contenders, summary, falcon_path = FALCON_RESULTS)
      out = []
      ratio = ->(id, c) { summary.find { |r| r["id"] == id }&.dig("cells", c, "ratio") }
      scaling_pairs(contenders, summary).each do |farce, _ref|
        next unless as_users_run?(farce)

        at64 = ratio.call("http64us", farce)
        SCALING_CHECKED.each do |conns|
          r = ratio.call("http#{conns}us", farce)
          value = r && at64
          out << verdict("`#{farce}`: CPU per request ÷ Async's at #{count_text(conns)} conns ≤ the same at 64", value,
                         value && r <= at64, format("%.2f× against %.2f×", r.to_f, at64.to_f))
        end
      end
      contenders.each do |farce|
        next unless as_users_run?(farce) && reference_of(farce, contenders)

        rates = HTTP_CONNECTIONS.filter_map { |c| (r = ratio.call("http#{c}", farce)) && [c, r] }
        lowest = rates.min_by(&:last)
        out << verdict("`#{farce}`: every HTTP row ≥ 1.0× Async's req/s", lowest, lowest && lowest.last >= 1.0,
                       lowest && format("lowest %.2f× at %s conns", lowest.last, count_text(lowest.first)))
        idle = ratio.call("scaleratio", farce)
        out << verdict("`#{farce}`: 10,000 idle / 0 idle ≥ Async's", idle, idle && idle >= 1.0, format("%.2f×", idle.to_f)) if idle
      end
      out.concat(falcon_targets(falcon_path))
      out << "" << "A missed target is weighed against #{CONNECTIONS_NOTE}." if out.any? { |l| l.include?("MISSED") }
      out
    end

    # Real Falcon's rows against their targets, from the results file bench/falcon_serve.rb wrote,
    # under a line saying when Falcon ran: the suite checks its targets before `rake bench` runs
    # Falcon, so the list it prints carries the previous Falcon run's figures (the README is
    # redrawn once Falcon has run).
    def falcon_targets(path)
      return [] unless File.file?(path)

      data = JSON.parse(File.read(path))
      rows = falcon_layouts(data).flat_map do |layout|
        layout["rows"].flat_map do |r|
          farce = r["Farce"]
          epoll = r["EPoll"]
          where = "Falcon, #{layout['name']}, #{count_text(r['connections'])} conns"
          p99 = [farce["latency_p99_ms"], epoll["latency_p99_ms"]]
          lines = [
            verdict("#{where}: req/s ≥ #{FALCON_RATE}× EPoll's", r["ratio"], r["ratio"].to_f >= FALCON_RATE,
                    format("%.2f×", r["ratio"].to_f)),
            verdict("#{where}: CPU per request ≤ #{FALCON_CPU}× EPoll's", r["cpu_ratio"], r["cpu_ratio"].to_f <= FALCON_CPU,
                    format("%.2f×", r["cpu_ratio"].to_f)),
            verdict("#{where}: p99 ≤ EPoll's", p99.all?, p99.all? && p99[0] <= p99[1],
                    format("%.1f against %.1f ms", *p99.map(&:to_f)))
          ]
          if layout["name"] == "per-cpu"
            share = farce["go_share_pct"]
            lines << verdict("#{where}: Go threads < #{FALCON_GO_SHARE_PCT}% of the workers' CPU", share,
                             share.to_f < FALCON_GO_SHARE_PCT, format("%.2f%%", share.to_f))
          end
          lines
        end
      end
      rows.empty? ? rows : ["", "Real Falcon, measured #{falcon_stamp(data)}:", "", *rows]
    end

    # farce as users run it on each Ruby: epoll, with YJIT or without, no diagnostic setting
    def as_users_run?(contender)
      contender.match?(/\Afarce-epoll(\+#{YJIT})?@/o)
    end

    def verdict(desc, value, ok, text)
      value.nil? || value == false ? "- ?: #{desc} — no data" : "- #{ok ? 'met' : 'MISSED'}: #{desc} — #{text}"
    end
  end
end
