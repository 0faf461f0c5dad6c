# frozen_string_literal: true

# bench/scaling.svg: the HTTP hello server's CPU per request against keep-alive connections (log
# scale), a line per contender of the scaling table, drawn by gnuplot as bench/plot.svg is.
module Bench
  class Runner
    SCALING_SVG = File.join(BENCH, "scaling.svg")

    # Writes bench/scaling.svg; true when it did. Each pair has a colour of its
    # own, farce's line solid and Async's dashed.
    def write_scaling_plot(contenders, summary)
      @scaling_plotted = false
      pairs = scaling_pairs(contenders, summary)
      return false if pairs.empty? || !which("gnuplot")

      series = pairs.flatten.uniq
      median = ->(c, conns) { summary.find { |r| r["id"] == "http#{conns}us" }&.dig("cells", c, "median") }
      FileUtils.mkdir_p(RESULTS)
      dat = File.join(RESULTS, "scaling.dat")
      File.open(dat, "w") do |f|
        f.puts "connections #{series.map { |s| "\"#{s}\"" }.join(' ')}"
        HTTP_CONNECTIONS.each do |conns|
          f.puts "#{conns} #{series.map { |s| (v = median.call(s, conns)) ? format('%.3f', v) : 'NaN' }.join(' ')}"
        end
      end
      plots = series.each_with_index.map do |s, i|
        colour = pairs.index { |pair| pair.include?(s) } + 1
        dash = s.start_with?("async") ? 2 : 1
        "\"#{dat}\" using 1:#{i + 2} with linespoints lw 2 pt 7 lc #{colour} dt #{dash} title \"#{s}\""
      end
      script = <<~GP
        set terminal svg size 900,520 dynamic font "sans,12" background "white" noenhanced
        set output "#{SCALING_SVG}"
        set title "HTTP hello: the server's CPU per request (every thread) against keep-alive connections #{@quick ? '(BENCH_QUICK)' : ''}\\nmedian of #{@runs} run(s), lower is better"
        set logscale x 10
        set xrange [10:16000]
        set xtics (#{HTTP_CONNECTIONS.map { |c| "\"#{count_text(c)}\" #{c}" }.join(', ')})
        set yrange [0:*]
        set xlabel "keep-alive connections (log scale)"
        set ylabel "µs of the server's CPU per request"
        set grid
        set key top left
        set datafile missing "NaN"
        plot #{plots.join(", \\\n     ")}
      GP
      File.write(File.join(RESULTS, "scaling.gp"), script)
      @scaling_plotted = system("gnuplot", File.join(RESULTS, "scaling.gp"), err: File.join(RESULTS, "gnuplot-scaling.log"))
      warn "bench: gnuplot failed, see bench/results/gnuplot-scaling.log" unless @scaling_plotted
      @scaling_plotted
    end
  end
end
