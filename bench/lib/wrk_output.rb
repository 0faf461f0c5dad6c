# frozen_string_literal: true

require_relative "wrk_time"

module Bench
  # The figures of one `wrk --latency` run, read from its output; the
  # suite's HTTP rows (bench/runner/running.rb) and real Falcon's
  # (bench/falcon_serve.rb) read it the same way.
  module WrkOutput
    module_function

    def parse(out)
      res = {}
      res["requests_per_second"] = out[%r{^Requests/sec:\s+([\d.]+)}, 1].to_f.round
      if (m = out.match(/^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)/))
        res["latency_avg_ms"] = WrkTime.to_ms(m[1]).round(3)
        res["latency_max_ms"] = WrkTime.to_ms(m[3]).round(3)
      end
      { "50" => "latency_p50_ms", "99" => "latency_p99_ms" }.each do |pct, key|
        v = out[/^\s+#{pct}%\s+(\S+)/, 1]
        res[key] = WrkTime.to_ms(v).round(3) if v
      end
      if (m = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/))
        res["socket_errors"] = m.captures.map(&:to_i).sum
      end
      res["non_2xx"] = out[/Non-2xx or 3xx responses:\s+(\d+)/, 1].to_i
      res["requests"] = out[/(\d+) requests in/, 1].to_i
      res
    end
  end
end
