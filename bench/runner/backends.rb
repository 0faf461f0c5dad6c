# frozen_string_literal: true

# io_uring against epoll: the same farce, Ruby and settings on the two backends, each
# figure as io_uring ÷ epoll within one run (the median over runs), and the targets io_uring
# must meet to be the default (`:auto`).
module Bench
  class Runner
    # [epoll contender, io_uring contender] that differ only in the backend.
    def backend_pairs(contenders)
      contenders.grep(/\Afarce-io_uring[+@]/).filter_map do |uring|
        epoll = uring.sub("farce-io_uring", "farce-epoll")
        [epoll, uring] if contenders.include?(epoll)
      end
    end

    # "Ruby 4.0, YJIT" for farce-io_uring+RUBY_YJIT_ENABLE=1@4.0 (other settings as VAR=VALUE).
    def pair_title(contender)
      _, env, ver = parse_contender(contender)
      settings = env.map { |k, v| "#{k}=#{v}" == YJIT ? "YJIT" : "#{k}=#{v}" }
      ["Ruby #{ver}", *settings].join(", ")
    end

    # Per row and pair: median over runs of io_uring ÷ epoll, nil without data.
    def backend_ratios(contenders)
      runs = per_run(contenders)
      backend_pairs(contenders).to_h do |epoll, uring|
        by_row = rows.to_h do |row|
          ratios = Array.new(@runs) do |i|
            e = row.value.call(runs[epoll][i])
            u = row.value.call(runs[uring][i])
            e && u && e.to_f.positive? && u >= 0 ? u.to_f / e : nil
          end
          [row.id, median(ratios)]
        end
        [[epoll, uring], by_row]
      end
    end

    def backend_lines(contenders)
      ratios = backend_ratios(contenders)
      return [] if ratios.empty?

      pairs = ratios.keys
      heads = pairs.map { |_, uring| pair_title(uring) }
      lines = ["| workload | unit | #{heads.join(' | ')} |", "| --- | --- |#{' ---: |' * pairs.size}"]
      rows.each do |row|
        cells = pairs.map { |pair| (r = ratios[pair][row.id]) ? format("%.2f", r) : "—" }
        next if cells.all?("—")

        better = row.better == :higher ? "↑" : "↓"
        lines << "| #{row.label} | #{row.unit} #{better} | #{cells.join(' | ')} |"
      end
      lines
    end

    # What io_uring must show before :auto may pick it, on every pair: ≥ 1.15× epoll's
    # req/s at 1,000 connections, a slowest request no worse, and level (within 5%) elsewhere
    # on the throughput rows.
    LEVEL = 0.95
    def backend_targets(contenders)
      ratios = backend_ratios(contenders)
      out = []
      ratios.each do |(_, uring), r|
        name = "`#{uring}`"
        check = ->(desc, v, ok) { out << "- #{v.nil? ? '?' : ok ? 'met' : 'MISSED'}: #{name}: #{desc} — #{v ? format('%.2f×', v) : 'no data'}" }
        v = r["http1000"]
        check.call("HTTP, 1,000 conns, req/s ≥ 1.15× epoll", v, v && v >= 1.15)
        v = r["http1000max"]
        check.call("HTTP, 1,000 conns, slowest request ≤ epoll's", v, v && v <= 1.0)
        others = rows.select { |row| row.better == :higher && row.unit.match?(%r{/s\z}) && row.id != "http1000" }
        worst = others.filter_map { |row| (x = r[row.id]) && [row, x] }.min_by { |_, x| x }
        check.call("every other throughput row ≥ #{LEVEL} of epoll (worst: #{worst ? worst[0].label : '—'})",
                   worst&.last, worst && worst.last >= LEVEL)
      end
      out
    end
  end
end
