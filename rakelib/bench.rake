# frozen_string_literal: true

# rake bench        full suite (~10-15 minutes; over an hour with FARCE_PEER_SUITES, whose contenders
#                   and real Falcon add the most: 873 steps at about 4.3 s each on two cores, then
#                   the scaling rows' ~12 more minutes, then Falcon's ~8 in two layouts): regenerates
#                   bench/README.md, bench/plot.svg and bench/scaling.svg
# rake bench:quick  ~2 minutes (BENCH_QUICK=1)
# rake bench:scaling  the scaling rows alone (HTTP hello at 16-10,000 connections and the 10,000-idle pair,
#                   farce against Async on 3.3 and on 4.0 with YJIT), then real Falcon in both layouts at 64,
#                   1,000 and 4,000 connections: ~14 + ~5 minutes, each part's compact table printed at its end
#                   (BENCH_FALCON=0: no Falcon; BENCH_NO_README=1: leave bench/README.md as it is)
# Knobs (see bench/runner.rb): BENCH_RUNS, BENCH_CONTENDERS, BENCH_ONLY, BENCH_NO_COMPILE=1, BENCH_PIN=0;
# FARCE_PEER_SUITES=DIR (the peers' folder, as for rake test:peers) adds Async on io-event's native
# EPoll on Ruby 4.0 and 3.4 (built once by .ci/io-event-build and cached beside the built Rubies), and real
# Falcon on Farce against EPoll after the suite (bench/falcon_serve.rb; BENCH_FALCON=0 leaves it out);
# the scale-out rows (bench/scale_out.rb: Ractors against processes, Ruby 4.0) follow (BENCH_SCALE_OUT=0 leaves them out).
require_relative "../bench/scale_out"

bench_deps = ENV["BENCH_NO_COMPILE"] == "1" ? [] : [:compile]

desc "Benchmark farce against Async at its best on each Ruby (FARCE_PEER_SUITES for 4.0/3.4) and threads; regenerate bench/README.md"
task bench: bench_deps do
  runner = File.expand_path("../bench/runner.rb", __dir__)
  ruby runner
  next if ENV["BENCH_ONLY"] # a run narrowed by BENCH_ONLY leaves out Falcon and the scale-out rows too

  # Real Falcon needs the peers' folder
  falcon = File.directory?(ENV["FARCE_PEER_SUITES"].to_s) && ENV["BENCH_FALCON"] != "0"
  ruby File.expand_path("../bench/falcon_serve.rb", __dir__) if falcon
  # The scale-out rows need a Ruby whose Ractors farce runs in (4.0 by default)
  scale_out = ENV["BENCH_SCALE_OUT"] != "0" &&
              (ENV["BENCH_SCALE_OUT_RUBY"] || File.executable?(Bench::ScaleOut::DEFAULT_RUBY))
  ruby File.expand_path("../bench/scale_out.rb", __dir__) if scale_out
  ruby runner, "--render" if (falcon || scale_out) && ENV["BENCH_NO_README"] != "1" # with their figures
end

namespace :bench do
  desc "Short benchmark run (~2 minutes, BENCH_QUICK=1)"
  task quick: bench_deps do
    ENV["BENCH_QUICK"] = "1"
    ruby File.expand_path("../bench/runner.rb", __dir__)
  end
end

namespace :bench do
  desc "The scaling rows alone (BENCH_ONLY=scaling: HTTP hello at 16-10,000 connections, farce against Async on 3.3 " \
       "and 4.0 with YJIT), then real Falcon in both layouts at 64, 1,000 and 4,000 connections (FARCE_PEER_SUITES=DIR)"
  task scaling: bench_deps do
    # the scaling contenders' Rubies are built too: a before/after comparison must not measure a stale build
    unless ENV["BENCH_NO_COMPILE"] == "1"
      %w[3.3 4.0].each do |ver|
        sh File.expand_path("../.ci/ruby-run", __dir__), ver, "rake", "compile" do |ok, status|
          warn "bench:scaling: rake compile for Ruby #{ver} failed (#{status.exitstatus}): no farce@#{ver} rows" unless ok
        end
      end
    end
    ENV["BENCH_ONLY"] = "scaling"
    runner = File.expand_path("../bench/runner.rb", __dir__)
    ruby runner
    next unless File.directory?(ENV["FARCE_PEER_SUITES"].to_s) && ENV["BENCH_FALCON"] != "0"

    ENV["BENCH_DURATION"] ||= "5" # 3 rounds x 2 layouts x 2 selectors x 3 counts: ~5 minutes
    ENV["BENCH_NO_COMPILE"] = "1" # built above (or asked not to be)
    ruby File.expand_path("../bench/falcon_serve.rb", __dir__)
    ruby runner, "--render" unless ENV["BENCH_NO_README"] == "1" # the README with the Falcon figures
  end
end

namespace :bench do
  desc "Scale-out: the HTTP hello server in N Ractors of one process against N forked processes, N = 1 and " \
       "the CPUs (Ruby 4.0 from /opt/rubies, or BENCH_SCALE_OUT_RUBY)"
  task :scale_out do
    ruby File.expand_path("../bench/scale_out.rb", __dir__)
  end
end

namespace :bench do
  desc "async-http example app under wrk: IO_EVENT_SELECTOR=Farce vs Async's EPoll (Ruby 3.3 via sid-run)"
  task :async_http do
    ruby File.expand_path("../bench/async_http.rb", __dir__)
  end
end

namespace :bench do
  desc "Real Falcon (falcon serve --forked) on IO_EVENT_SELECTOR=Farce vs io-event's EPoll under wrk, Ruby 3.3 via sid-run " \
       "(FARCE_PEER_SUITES=DIR)"
  task :falcon do
    ruby File.expand_path("../bench/falcon_serve.rb", __dir__)
  end
end

namespace :bench do
  desc "Instructions per round trip or request by callgrind (CONTENDER=farce-epoll@4.0 WORKLOAD=ppsock|pp|http64|http1000)"
  task :instructions do
    ruby File.expand_path("../bench/instructions.rb", __dir__), ENV.fetch("CONTENDER", "farce-epoll"),
         ENV.fetch("WORKLOAD", "ppsock")
  end

  desc "Where the HTTP server's CPU goes, kernel included, by perf (CONTENDER=farce-epoll@4.0 WORKLOAD=http64|http1000)"
  task :cpu_profile do
    ruby File.expand_path("../bench/cpu_profile.rb", __dir__), ENV.fetch("CONTENDER", "farce-epoll"),
         ENV.fetch("WORKLOAD", "http64"), *ENV["SECONDS"]
  end
end
