# frozen_string_literal: true

require_relative "../lib/falcon_table"

# The "Real Falcon" section of bench/README.md, from bench/results/falcon_serve.json, which
# bench/falcon_serve.rb writes (`rake bench` runs it after the suite when FARCE_PEER_SUITES names the
# peers' folder). Falcon is its own driver, not a contender of the suite: it serves through
# Async's selector interface, so its contenders are the two selectors, not the schedulers, and its
# reference is io-event's EPoll rather than Async on the same server script.
module Bench
  class Runner
    FALCON_RESULTS = File.join(RESULTS, "falcon_serve.json")

    def falcon_lines(path = FALCON_RESULTS)
      return ["No figures: `rake bench` runs real Falcon when `FARCE_PEER_SUITES` names the peers' folder."] unless File.file?(path)

      data = JSON.parse(File.read(path))
      stamp = falcon_stamp(data)
      layouts = falcon_layouts(data)
      lines = [
        "`#{data['falcon']} serve --forked` serving `bench/falcon_hello.ru` on `IO_EVENT_SELECTOR=Farce` against " \
        "io-event's own EPoll selector, Ruby 3.3 (sid chroot), measured #{data['generated_at'] ? 'on ' : ''}#{stamp} by " \
        "`bench/falcon_serve.rb` in #{layouts.size == 1 ? 'one layout' : "#{layouts.size} layouts in the same run"}: " \
        "#{data['rounds']} alternating rounds of #{data['duration']} s of wrk per connection count" \
        "#{data['warmup'] ? " after #{data['warmup']} s of warm-up" : ''}, load average #{data['load_average']} at the end. " \
        "Each figure is the median over rounds; the ratios (Farce ÷ EPoll, of req/s and of CPU per request) are the " \
        "medians of each round's. CPU per request is the whole server's (every process of its group) over the steady " \
        "part of each run, once wrk holds all its connections, divided by the requests the server received meanwhile " \
        "(bench/lib/steady_window.rb). Farce's Go threads are the threads of Farce's workers that block the signals farce's core is " \
        "loaded with (bench/lib/group_threads.rb says why that tells them apart); their share is of the workers' CPU. " \
        "Errors are wrk's (socket errors and non-2xx answers) over every round; open is the fewest connections the " \
        "kernel held established at the server when the steady part began and ended.",
        ""
      ]
      layouts.each do |layout|
        lines << "#{FalconTable.title(layout)}:" << "" << FalconTable.lines(layout) << ""
      end
      lines.flatten
    end

    # When the Falcon results were measured, as the README and the targets list print it.
    def falcon_stamp(data)
      at = data["generated_at"]
      at ? Time.parse(at).utc.strftime("%Y-%m-%d %H:%M UTC") : "at a time the results do not record"
    end

    # The layouts of a results file; one written before there were two has its one layout at the top.
    def falcon_layouts(data)
      return data["layouts"] if data["layouts"]

      [{ "name" => data["server_pin"] ? "pinned" : "per-cpu", "workers" => data["workers"],
         "server_pin" => data["server_pin"], "wrk_pin" => data["wrk_pin"], "rows" => data["rows"] }]
    end
  end
end
