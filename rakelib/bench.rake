# frozen_string_literal: true

# rake bench        full suite (~10-15 minutes): regenerates bench/README.md and bench/plot.svg
# rake bench:quick  ~2 minutes (BENCH_QUICK=1)
# Knobs (see bench/runner.rb): BENCH_RUNS, BENCH_CONTENDERS, BENCH_ONLY, BENCH_NO_COMPILE=1.
bench_deps = ENV["BENCH_NO_COMPILE"] == "1" ? [] : [:compile]

desc "Benchmark farce against Async (Ruby 3.3 via sid-run) and threads; regenerate bench/README.md"
task bench: bench_deps do
  ruby File.expand_path("../bench/runner.rb", __dir__)
end

namespace :bench do
  desc "Short benchmark run (~2 minutes, BENCH_QUICK=1)"
  task quick: bench_deps do
    ENV["BENCH_QUICK"] = "1"
    ruby File.expand_path("../bench/runner.rb", __dir__)
  end
end

namespace :bench do
  desc "async-http example app under wrk: IO_EVENT_SELECTOR=Farce vs Async's EPoll (Ruby 3.3 via sid-run)"
  task :async_http do
    ruby File.expand_path("../bench/async_http.rb", __dir__)
  end
end
