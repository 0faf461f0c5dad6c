# frozen_string_literal: true

# The scaling rows: the HTTP hello server at 16 to 10,000 keep-alive connections and the
# 10,000-idle pair, farce against Async on the Rubies production runs (3.3, and 4.0 with YJIT),
# which contenders run them, and their compact table (stdout and bench/README.md).
# `BENCH_ONLY=scaling` (`rake bench:scaling`) runs these alone.
module Bench
  class Runner
    HTTP_CONNECTIONS = [16, 64, 256, 1000, 4000, 10_000].freeze
    # the counts every contender runs; the others, the scaling contenders only
    HTTP_EVERYONE = [64, 1000].freeze
    SCALING_CASES = (HTTP_CONNECTIONS.map { |c| "http#{c}" } + %w[scale0 scale10k]).freeze
    # farce's side of each scaling pair; the other side is its reference (Async at its best on that Ruby)
    SCALING_FARCE = ["farce-epoll@3.3", "farce-epoll+#{YJIT}@4.0"].freeze

    def scaling_only?
      ENV["BENCH_ONLY"].to_s.split(",").map(&:strip).include?("scaling")
    end

    # Who runs the scaling-only cases: the scaling pairs among the contenders,
    # or every contender when BENCH_CONTENDERS chose them by hand.
    def scaling_contenders(contenders)
      return contenders if ENV["BENCH_CONTENDERS"]

      farce = SCALING_FARCE & contenders
      wanted = farce + farce.filter_map { |c| reference_of(c, contenders) }
      contenders.select { |c| wanted.include?(c) }
    end

    # [farce, reference] for every contender with a reference that has a
    # figure at a count only the scaling contenders run.
    def scaling_pairs(contenders, summary)
      ids = (HTTP_CONNECTIONS - HTTP_EVERYONE).map { |c| "http#{c}us" }
      rows = summary.select { |r| ids.include?(r["id"]) }
      contenders.filter_map do |c|
        ref = reference_of(c, contenders)
        [c, ref] if ref && rows.any? { |r| r.dig("cells", c, "median") }
      end
    end

    def scaling_lines(contenders, summary)
      pairs = scaling_pairs(contenders, summary)
      return [] if pairs.empty?

      cell = ->(id, c) { summary.find { |r| r["id"] == id }&.dig("cells", c) }
      lines = ["| farce, Async | connections | CPU/request farce | CPU/request Async | CPU ÷ | req/s farce | req/s Async | " \
               "req/s ÷ | open (fewest) farce / Async | errors farce / Async | " \
               "Ruby's collections per 1,000 requests farce / Async |",
               "| --- |#{' ---: |' * 10}"]
      pairs.each do |farce, ref|
        HTTP_CONNECTIONS.each do |c|
          id = "http#{c}"
          us = [farce, ref].map { |x| cell.call("#{id}us", x) }
          rate = [farce, ref].map { |x| cell.call(id, x) }
          next if (us + rate).all? { |x| x.nil? || x["median"].nil? }

          open = [farce, ref].map { |x| fmt(cell.call("#{id}open", x)&.dig("runs")&.compact&.min, "conns") }
          errors = [farce, ref].map { |x| fmt(cell.call("#{id}err", x)&.dig("runs")&.compact&.sum, "errors") }
          gcs = [farce, ref].map { |x| fmt(cell.call("#{id}gc", x)&.dig("median"), "ratio") }
          cpu = [farce, ref].zip(us).map do |x, u|
            whole = whole_run?(u, cell.call("#{id}steady", x))
            "#{fmt(u&.dig('median'), 'µs')}#{whole ? ' †' : ''}"
          end
          lines << "| `#{farce}`, `#{ref}` | #{count_text(c)} | #{cpu.join(' | ')} | " \
                   "#{times(us[0]&.dig('ratio'))} | #{rate.map { |x| fmt(x&.dig('median'), 'req/s') }.join(' | ')} | " \
                   "#{times(rate[0]&.dig('ratio'))} | #{open.join(' / ')} | #{errors.join(' / ')} | #{gcs.join(' / ')} |"
        end
      end
      if lines.any? { |l| l.include?(" †") }
        lines << "" << "† in some run the CPU per request is over the whole run, the connections' setup included: wrk did " \
                       "not hold all its connections by halfway (the run's notes say which)"
      end
      lines << ""
      pairs.each do |farce, ref|
        f = cell.call("scaleratio", farce)
        a = cell.call("scaleratio", ref)
        next unless f || a

        lines << "- 10,000 idle + one busy pair, its rate over the 0-idle rate: `#{farce}` #{fmt(f&.dig('median'), 'ratio')}, " \
                 "`#{ref}` #{fmt(a&.dig('median'), 'ratio')} (#{times(f&.dig('ratio'))})"
      end
      lines
    end

    # Whether some run that has a CPU per request took it over the whole run
    # (no steady part: bench/lib/steady_window.rb).
    def whole_run?(cpu_cell, steady_cell)
      cpu = cpu_cell&.dig("runs") || []
      steady = steady_cell&.dig("runs") || []
      cpu.each_index.any? { |i| cpu[i] && steady[i].nil? }
    end

    def times(ratio)
      ratio ? format("%.2f×", ratio) : "—"
    end

    # The compact table at the end of a run that has scaling rows.
    def print_scaling(contenders, summary)
      lines = scaling_lines(contenders, summary)
      return if lines.empty?

      puts
      puts "Scaling: the HTTP hello server's CPU per request (µs, every thread) and req/s, median of #{@runs} run(s); " \
           "÷ is the median of the same run's farce ÷ Async"
      puts lines
    end
  end
end
