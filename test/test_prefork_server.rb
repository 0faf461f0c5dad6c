# frozen_string_literal: true

require_relative "test_helper"
require "net/http"

# The issue's prefork acceptance test: examples/prefork_server.rb's master
# serves requests on farce (its Go runtime starts), then forks 4 workers that
# each load a fresh copy of the core and answer wrk on the shared socket.
class TestPreforkServer < Minitest::Test
  EXAMPLE = File.expand_path("../examples/prefork_server.rb", __dir__)
  WORKERS = 4
  WARMUP = 20

  def setup
    skip_on_ruby_loop "forks workers that each load a fresh copy of the Go core"
    skip "wrk is not installed" unless system("command -v wrk > /dev/null")
  end

  def test_workers_forked_after_the_master_served_on_farce_answer_wrk
    io = IO.popen({ "FARCE_BACKEND" => backend.to_s },
                  [RbConfig.ruby, EXAMPLE, "0", WORKERS.to_s, WARMUP.to_s], err: %i[child out], pgroup: true)
    output = +""
    reader = Thread.new { io.each_line { |line| output << line } }
    wait_for(output, /listening on (\d+)$/, 30)
    port = Integer(output[/listening on (\d+)$/, 1])

    Net::HTTP.start("127.0.0.1", port) do |http|
      WARMUP.times { assert_equal "200", http.get("/").code }
    end
    wait_until(30) { output.scan(/^worker \d+ up /).size == WORKERS && output.match?(/^workers [\d ]+$/) }
    assert_match(/master served #{WARMUP} on file core, generation 0/, output)
    workers = output[/^workers ([\d ]+)$/, 1].split.map(&:to_i)
    assert_equal WORKERS, workers.size
    workers.each { |pid| assert_match(/^worker #{pid} up on (memfd|tmpfile) core, generation 1$/, output) }

    wrk = `wrk -t2 -c64 -d3s http://127.0.0.1:#{port}/ 2>&1`
    assert $?.success?, wrk
    requests = Integer(wrk[/(\d+) requests in/, 1])
    assert_operator requests, :>, 0, wrk
    refute_match(/Non-2xx/, wrk)
    refute_match(/Socket errors/, wrk)

    served_by = 8.times.map { Net::HTTP.get_response("127.0.0.1", "/", port)["X-Served-By"].to_i }
    assert_empty served_by - workers, "every response after fork comes from a worker"

    Process.kill(:TERM, io.pid)
    assert reader.join(30), "the server did not stop on TERM:\n#{output}"
    io.close
    assert $?.success?, output
    counts = workers.to_h { |pid| [pid, Integer(output[/^worker #{pid} served (\d+)$/, 1] || -1)] }
    counts.each { |pid, n| assert_operator n, :>, 0, "worker #{pid} answered nothing:\n#{output}\n#{wrk}" }
    assert_operator counts.values.sum, :>=, requests + served_by.size, "workers' counts against wrk's:\n#{output}\n#{wrk}"
    puts "\nprefork (#{backend}): wrk #{requests} responses, per worker #{counts.values.join(' ')}" if ENV["VERBOSE"]
  ensure
    if io && !io.closed?
      Process.kill(:KILL, -io.pid) rescue nil
      io.close
    end
  end

  private

  def wait_for(output, pattern, seconds)
    wait_until(seconds) { output.match?(pattern) }
    assert_match pattern, output
  end

  def wait_until(seconds)
    deadline = monotonic + seconds
    sleep 0.02 until yield || monotonic > deadline
  end
end
