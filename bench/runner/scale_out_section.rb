# frozen_string_literal: true

require_relative "../scale_out"

# The "Scale-out: Ractors against processes" section of bench/README.md, from
# bench/results/scale_out.json, which bench/scale_out.rb writes (`rake bench` runs it after the
# suite). Like real Falcon it is its own driver, not a contender of the suite: what it compares
# is one server's layouts (workers as Ractors of one process, or as processes), all on farce.
module Bench
  class Runner
    def scale_out_lines(path = ScaleOut::RESULTS)
      return ["No figures: `rake bench:scale_out` (or a full `rake bench`) measures them."] unless File.file?(path)

      data = JSON.parse(File.read(path))
      [
        "`bench/http_hello.rb`'s server, a fiber per connection on farce#{data['backend'] ? " (#{data['backend']})" : ''}, " \
        "served by N workers with a listening socket each on one port (SO_REUSEPORT), as N Ractors of one " \
        "process or as N forked processes (`bench/scale_out_server.rb`), Ruby #{data['ruby']}, " \
        "#{data['cpus']} CPUs, measured on #{Time.parse(data['generated_at']).utc.strftime('%Y-%m-%d %H:%M UTC')} " \
        "by `bench/scale_out.rb`: #{data['rounds']} alternating rounds of #{data['duration']} s of " \
        "`wrk -t2 -c#{data['connections']}` after 2 s of warm-up, unpinned (wrk shares the CPUs with the " \
        "server). Medians over rounds; CPU per request is every thread of the server's process group over " \
        "the measured run; RSS is every process's, at its end.",
        "",
        ScaleOut.table(data)
      ]
    end
  end
end
