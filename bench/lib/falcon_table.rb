# frozen_string_literal: true

module Bench
  # Real Falcon's table, one per layout, from what bench/falcon_serve.rb
  # writes to bench/results/falcon_serve.json: printed by falcon_serve.rb at
  # the end of its run and drawn into bench/README.md by the runner
  # (bench/runner/falcon_section.rb), so that the two read the same.
  module FalconTable
    module_function

    HEAD = "| connections | Farce req/s | EPoll req/s | Farce ÷ EPoll (min-max) | p99 Farce | p99 EPoll | " \
           "CPU/request Farce | CPU/request EPoll | CPU ÷ | Farce's Go threads: CPU/request | share of workers' CPU | " \
           "errors Farce / EPoll | open Farce / EPoll |"

    # "pinned: one worker (`-n 1`), the server on CPU 0, wrk on CPU 1"
    def title(layout)
      where = layout["server_pin"] ? "the server on CPU(s) #{layout['server_pin']}, wrk on CPU #{layout['wrk_pin']}" : "nothing pinned"
      "#{layout['name']}: #{layout['workers']} worker(s) (`-n #{layout['workers']}`), #{where}"
    end

    def lines(layout)
      out = [HEAD, "|#{' ---: |' * HEAD.count('|').pred}"]
      layout["rows"].each do |r|
        f = r["Farce"]
        e = r["EPoll"]
        out << "| #{[count(r['connections']), count(f['requests_per_second']), count(e['requests_per_second']),
                     "#{times(r['ratio'])} (#{two(r['ratio_min'])}-#{two(r['ratio_max'])})",
                     "#{num(f['latency_p99_ms'])} ms", "#{num(e['latency_p99_ms'])} ms",
                     *[f, e].map { |x| "#{num(x['cpu_us_per_request'])} µs#{x['whole_run_rounds'].to_i.positive? ? ' †' : ''}" },
                     times(r['cpu_ratio']),
                     f["go_us_per_request"] ? "#{num(f['go_us_per_request'])} µs" : "—",
                     f["go_share_pct"] ? "#{num(f['go_share_pct'])}%" : "—",
                     "#{count(f['errors'])} / #{count(e['errors'])}",
                     "#{count(f['connections_open'])} / #{count(e['connections_open'])}"].join(' | ')} |"
      end
      if layout["rows"].any? { |r| SELECTORS.any? { |sel| r.dig(sel, "whole_run_rounds").to_i.positive? } }
        out << "" << "† in some round the CPU per request is over the whole run, the connections' setup included: wrk " \
                     "did not hold all its connections by halfway"
      end
      out
    end

    SELECTORS = %w[Farce EPoll].freeze

    def count(v) = v.nil? ? "—" : v.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    def num(v) = v.nil? ? "—" : (v >= 100 ? v.round.to_s : format("%.3g", v))
    def two(v) = v.nil? ? "—" : format("%.2f", v)
    def times(v) = v.nil? ? "—" : format("%.2f×", v)
  end
end
