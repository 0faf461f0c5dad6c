# frozen_string_literal: true

# Output: the results JSON, the tables, the plot, the targets and the contender descriptions
# that bench/README.md is made of.
module Bench
  class Runner
    def machine
      cpu = File.read("/proc/cpuinfo")[/^model name\s*:\s*(.+)$/, 1] rescue nil
      go = `go version 2>/dev/null`.strip
      {
        "nproc" => `nproc`.strip.to_i, "cpu" => cpu || "unknown", "kernel" => `uname -sr`.strip,
        "memory_gib" => ((File.read("/proc/meminfo")[/MemTotal:\s+(\d+)/, 1].to_i / 1048576.0).round(1) rescue nil),
        "host_ruby" => RUBY_DESCRIPTION, "go" => go.empty? ? "not found" : go,
        "wrk" => `wrk -v 2>&1`[/wrk \S+/].to_s.sub("debian/", ""),
        "pinned" => !pin_prefixes[0].empty?
      }
    end

    def fmt(value, unit)
      return "—" if value.nil?

      if %w[ms s KiB ratio µs].include?(unit) || unit.start_with?("%")
        value >= 100 ? value.round.to_s : format("%.3g", value)
      else
        value.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
      end
    end

    def cell_text(cell, unit, contender)
      text = fmt(cell["median"], unit)
      text += format(" (%.2f×)", cell["ratio"]) if cell["ratio"] && !contender.start_with?("async")
      text
    end

    def versions_of(contender)
      @raw.each_value do |by_c|
        Array(by_c[contender]).each { |r| return r["versions"] if r && r["versions"] && r["versions"].size > 1 }
      end
      @raw.each_value { |by_c| Array(by_c[contender]).each { |r| return r["versions"] if r&.dig("versions") } }
      {}
    end

    def describe(contender)
      v = versions_of(contender)
      name, env, ver = parse_contender(contender)
      where = if ver == RUBY_ABI then ""
              elsif other_rubies[ver] then " (#{other_rubies[ver]})"
              else " (sid chroot via .ci/sid-run)"
              end
      ruby = "Ruby #{v['ruby'] || ver}#{env['RUBY_YJIT_ENABLE'] == '1' ? ' with YJIT' : ''}#{where}"
      env = env.reject { |k, _| k == "RUBY_YJIT_ENABLE" }
      settings = env.empty? ? "" : ", #{env.map { |k, val| "#{k}=#{val}" }.join(' ')}"
      case name
      when "farce-ruby"
        "farce #{v['farce']}, its pure-Ruby loop (no Go), #{ruby}"
      when /\Afarce/
        "farce #{v['farce']} :#{v['backend'] || name.delete_prefix('farce-')} backend#{settings}, #{ruby}"
      when "async"
        "Async #{v['async']}, io-event #{v['io_event']} (#{v['selector']}), #{ruby}"
      when "async-epoll"
        "Async #{v['async']}, io-event #{v['io_event']} (#{v['selector']}, its C extension built for this Ruby " \
          "from the peers' folder by .ci/io-event-build), #{ruby}"
      when "async-farce"
        "Async #{v['async']} on farce's io-event selector (IO_EVENT_SELECTOR=Farce; Debian's pure-Ruby Async), #{ruby}"
      when "threads"
        mn = env["RUBY_MN_THREADS"] == "1" ? " on Ruby's M:N thread scheduler (RUBY_MN_THREADS=1)" : ""
        "a Ruby Thread per task#{mn}, #{ruby}"
      when "c-epoll"
        "C, no Ruby: `bench/pingpong_epoll.c` (one thread, epoll, non-blocking pipes or socketpairs), built with gcc -O2"
      when "ruby-floor"
        "plain fibers, `bench/ruby_floor.rb` (read_nonblock/write_nonblock, Fiber#transfer to the " \
          "fiber a write made runnable, IO.select only when all would block), #{ruby}"
      else
        contender
      end
    end

    def write_outputs(contenders, references, summary, info)
      FileUtils.mkdir_p(RESULTS)
      stamp = Time.now.utc.strftime("%Y%m%dT%H%M%SZ")
      data = { "generated_at" => Time.now.utc.iso8601, "quick" => @quick, "runs" => @runs, "machine" => info,
               "contenders" => contenders.to_h { |c| [c, describe(c)] },
               "references" => references.to_h { |c| [c, describe(c)] }, "summary" => summary,
               "raw" => @raw, "notes" => @notes, "load" => @load }
      json = JSON.pretty_generate(data)
      File.write(File.join(RESULTS, "results-#{stamp}.json"), json)
      File.write(File.join(RESULTS, "latest.json"), json)
      print_table(contenders, summary)
      puts limit_lines(contenders, references)
      puts production_targets(contenders, references, summary)
      print_scaling(contenders, summary)
      puts connection_targets(contenders, summary)
      return if ENV["BENCH_NO_README"] == "1"

      plotted = write_plot(contenders, summary)
      write_scaling_plot(contenders, summary)
      File.write(File.join(BENCH, "README.md"), readme(contenders, references, summary, info, plotted))
      svgs = [("bench/plot.svg" if plotted), ("bench/scaling.svg" if @scaling_plotted)].compact
      warn "bench: wrote bench/README.md, #{svgs.map { |f| "#{f}, " }.join}and bench/results/results-#{stamp}.json"
    end

    def table_lines(contenders, summary)
      lines = []
      lines << "| workload | unit | #{contenders.join(' | ')} |"
      lines << "| --- | --- |#{' ---: |' * contenders.size}"
      summary.each do |row|
        next if row["section"] == "scaling" # in the scaling table (bench/runner/scaling.rb)

        better = row["better"] == "higher" ? "↑" : "↓"
        cells = contenders.map { |c| cell_text(row["cells"][c], row["unit"], c) }
        lines << "| #{row['label']} | #{row['unit']} #{better} | #{cells.join(' | ')} |"
      end
      lines
    end

    # "How close to the limit": the ping-pong rates of the references and of
    # every contender, and each contender as a fraction of the Ruby floor on
    # its Ruby (median over runs of the same run's ratio).
    def limit_lines(contenders, references)
      return [] if references.empty?

      runs = per_run(contenders + references)
      rate = ->(c, id, i) { runs[c][i]&.dig(id, "round_trips_per_second") }
      ids = %w[pp1 ppsock1 pp100]
      lines = ["| | ping-pong, 1 pair (round trips/s) | socketpair, 1 pair | 100 pairs | fraction of the Ruby floor, " \
               "1 pair | socketpair | 100 pairs |",
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
      (references + contenders.grep_v(/\Athreads/)).each do |c|
        floor = floor_of(c)
        cells = ids.map { |id| fmt(median(Array.new(@runs) { |i| rate.call(c, id, i) }), "round trips/s") }
        fractions = ids.map do |id|
          next "—" if reference?(c) || !runs[floor]

          f = median(Array.new(@runs) { |i| (a = rate.call(c, id, i)) && (b = rate.call(floor, id, i)) && b.positive? ? a.to_f / b : nil })
          f ? format("%.2f", f) : "—"
        end
        next if cells.all?("—")

        lines << "| `#{c}` | #{cells.join(' | ')} | #{fractions.join(' | ')} |"
      end
      lines
    end

    def print_table(contenders, summary)
      puts
      puts table_lines(contenders, summary)
      puts
      @notes.each { |n| puts "note: #{n}" }
    end

    def write_plot(contenders, summary)
      series = contenders.select { |c| reference_of(c, contenders) }
      return false unless which("gnuplot") && !series.empty?

      plot_rows = summary.select { |r| r["plot"] }
      return false if plot_rows.empty?

      FileUtils.mkdir_p(RESULTS) # --render from a saved JSON may run where no run has made it
      dat = File.join(RESULTS, "plot.dat")
      File.open(dat, "w") do |f|
        f.puts "workload #{series.map { |s| "\"#{s}\"" }.join(' ')}"
        plot_rows.each do |row|
          vals = series.map { |s| (r = row["cells"][s]["ratio"]) ? format("%.4f", r) : "NaN" }
          f.puts "\"#{row['label']}\" #{vals.join(' ')}"
        end
      end
      svg = File.join(BENCH, "plot.svg")
      script = <<~GP
        set terminal svg size 1000,520 dynamic font "sans,12" background "white" noenhanced
        set output "#{svg}"
        set title "throughput relative to Async on the same Ruby (=1) #{@quick ? '(BENCH_QUICK)' : ''}\\nmedian of #{@runs} run(s), higher is better, log scale, bars above 64x cut off"
        set style data histograms
        set style histogram clustered gap 1
        set style fill solid 0.85 border -1
        set boxwidth 0.9
        set logscale y 2
        set yrange [0.0078125:64]
        set ylabel "ratio to Async"
        set xtics rotate by -25 scale 0 font ",11"
        set grid ytics
        set key top left
        set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 dt 2 lc rgb "black"
        plot for [i=2:#{series.size + 1}] "#{dat}" using i:xtic(1) title columnheader(i)
      GP
      File.write(File.join(RESULTS, "plot.gp"), script)
      ok = system("gnuplot", File.join(RESULTS, "plot.gp"), err: File.join(RESULTS, "gnuplot.log"))
      warn "bench: gnuplot failed, see bench/results/gnuplot.log" unless ok
      ok
    end

    # The standing targets for farce's epoll backend against Async on the same
    # Ruby (3.3, 3.4), and the idle-connection target on every Ruby.
    def targets(contenders, summary)
      get = ->(id, c) { summary.find { |r| r["id"] == id }&.dig("cells", c) }
      out = []
      check = lambda do |desc, ok, detail|
        out << "- #{ok.nil? ? '?' : ok ? 'met' : 'MISSED'}: #{desc} — #{detail}"
      end
      ratio = ->(id, c) { get.call(id, c)&.dig("ratio") }
      contenders.grep(/\Afarce-epoll@/).each do |farce|
        ver = ruby_of(farce)
        if reference_of(farce, contenders)
          %w[pp1 pp100].each do |id|
            r = ratio.call(id, farce)
            check.call("Ruby #{ver}: ping-pong ≥ 2.5× Async (#{id})", r && r >= 2.5, r ? format("%.2f×", r) : "no data")
          end
          %w[http64 http1000].each do |id|
            r = ratio.call(id, farce)
            max = get.call("#{id}max", farce)&.dig("median")
            ok = r && r >= 2
            ok &&= max && max < 50 if id == "http1000"
            detail = r ? format("%.2f× req/s, max latency %s ms", r, fmt(max, "ms")) : "no data"
            check.call("Ruby #{ver}: HTTP ≥ 2× Async req/s#{id == 'http1000' ? ', max latency < 50 ms' : ''} (#{id})",
                       ok, detail)
          end
          r = ratio.call("timersp99", farce)
          check.call("Ruby #{ver}: timer lateness p99 ≤ ½ of Async's", r && r <= 0.5,
                     r ? format("%.2f× Async's (%s ms)", r, fmt(get.call("timersp99", farce)&.dig("median"), "ms")) : "no data")
        end
        s = get.call("scaleratio", farce)&.dig("median")
        check.call("Ruby #{ver}: 10,000 idle connections ≥ 0.9 of the 0-idle rate", s && s >= 0.9,
                   s ? format("%.2f", s) : "no data")
      end
      out
    end

    def load_text
      return "not recorded" if @load.nil? || @load.empty?

      v = @load.compact.sort
      format("1-minute load average %.2f–%.2f (median %.2f) over the run, on %d CPUs", v.first, v.last,
             median(v), `nproc`.to_i)
    end
  end
end
