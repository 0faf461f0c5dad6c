# frozen_string_literal: true

# The "Real Falcon" section of bench/README.md, from bench/results/falcon_serve.json, which
# bench/falcon_serve.rb writes (`rake bench` runs it after the suite when FARCE_PEER_SUITES names the
# peers' folder). Falcon is its own driver, not a contender of the suite: it serves through
# Async's selector interface, so its contenders are the two selectors, not the schedulers, and its
# reference is io-event's EPoll rather than Async on the same server script.
module Bench
  class Runner
    FALCON_RESULTS = File.join(RESULTS, "falcon_serve.json")

    def falcon_lines
      return ["No figures: `rake bench` runs real Falcon when `FARCE_PEER_SUITES` names the peers' folder."] unless File.file?(FALCON_RESULTS)

      data = JSON.parse(File.read(FALCON_RESULTS))
      stamp = data["generated_at"] ? Time.parse(data["generated_at"]).utc.strftime("%Y-%m-%d %H:%M UTC") : "at a time the results do not record"
      lines = [
        "`#{data['falcon']} serve --forked -n #{data['workers']}` serving `bench/falcon_hello.ru` on " \
        "`IO_EVENT_SELECTOR=Farce` against io-event's own EPoll selector, Ruby 3.3 (sid chroot), " \
        "measured #{data["generated_at"] ? "on " : ""}#{stamp} by `bench/falcon_serve.rb`: #{data['rounds']} alternating rounds of " \
        "#{data['duration']} s of wrk per connection count, the server on CPU(s) #{data['server_pin'] || 'unpinned'}, " \
        "wrk on #{data['wrk_pin'] || 'any CPU'}, load average #{data['load_average']} at the end. Each figure is " \
        "the median over rounds; the ratio is the median of each round's Farce ÷ EPoll. CPU per request is the " \
        "whole server's (every process of its group) over the requests wrk counted.",
        "",
        "| connections | Farce req/s | EPoll req/s | Farce ÷ EPoll (min-max) | p99 Farce | p99 EPoll | CPU/request Farce | CPU/request EPoll |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
      ]
      data["rows"].each do |r|
        f = r["Farce"]
        e = r["EPoll"]
        lines << format("| %s | %s | %s | %.2f× (%.2f-%.2f) | %s ms | %s ms | %s µs | %s µs |", fmt(r["connections"], "conns"),
                        fmt(f["requests_per_second"], "req/s"), fmt(e["requests_per_second"], "req/s"), r["ratio"], r["ratio_min"],
                        r["ratio_max"], fmt(f["latency_p99_ms"], "ms"), fmt(e["latency_p99_ms"], "ms"),
                        fmt(f["cpu_us_per_request"], "µs"), fmt(e["cpu_us_per_request"], "µs"))
      end
      lines
    end
  end
end
