# frozen_string_literal: true

# From raw runs to the table's cells: medians over runs and the ratio to Async on the same Ruby.
module Bench
  class Runner
    def median(values)
      v = values.compact.sort
      return nil if v.empty?

      v.size.odd? ? v[v.size / 2] : (v[v.size / 2 - 1] + v[v.size / 2]) / 2.0
    end

    # What a contender's ratios divide by: Async at its best on the same Ruby,
    # YJIT the same (none for Async itself): on io-event's native EPoll built
    # here (async-epoll, 4.0 and 3.4), or Debian's (async, 3.3).
    def reference_of(contender, contenders)
      return nil if contender.start_with?("async")

      _, env, ver = parse_contender(contender)
      jit = env["RUBY_YJIT_ENABLE"] == "1" ? "+#{YJIT}" : ""
      ["async-epoll#{jit}@#{ver}", "async#{jit}@#{ver}"].find { |ref| contenders.include?(ref) }
    end

    # The Go threads' rows count every thread that appeared after the server
    # started; a thread per task has only its own there, not Go's.
    def go_row?(row)
      row.id.match?(/go(us)?\z/)
    end

    # per_run[contender] = [{case_id => result hash}, ...] (index = run)
    def per_run(contenders)
      contenders.to_h do |c|
        [c, Array.new(@runs) { |i| @raw.to_h { |cid, by_c| [cid, by_c[c]&.[](i)&.dig("result")] } }]
      end
    end

    def summarize(contenders)
      per_run = per_run(contenders)
      rows.filter_map do |row|
        cells = contenders.to_h do |c|
          values = per_run[c].map { |run| row.value.call(run) }
          values = [] if go_row?(row) && parse_contender(c)[0] == "threads"
          ref = reference_of(c, contenders)
          ratios = if ref
                     values.each_with_index.map do |v, i|
                       a = row.value.call(per_run[ref][i])
                       v && a && a.to_f.positive? && v >= 0 ? v.to_f / a : nil
                     end
                   else
                     []
                   end
          [c, { "median" => median(values), "ratio" => median(ratios), "runs" => values }]
        end
        next if cells.values.all? { |cell| cell["median"].nil? }

        { "id" => row.id, "label" => row.label, "unit" => row.unit, "better" => row.better.to_s,
          "plot" => row.plot ? true : false, "section" => row.section&.to_s, "cells" => cells }
      end
    end
  end
end
