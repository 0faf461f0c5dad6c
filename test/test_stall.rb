# frozen_string_literal: true

require_relative "test_helper"
require "zlib"

# Stall detection: a fiber that holds the loop longer than the
# threshold is reported once, when it gives the loop back, with where it
# was while it held it. Margins are wide: the busy fibers run 3x the
# threshold, the polite ones yield 50x under it.
class TestStall < Minitest::Test
  THRESHOLD = 0.1

  # The Ruby loop's watchdog is a thread, which gets the GVL only at Ruby's
  # 100 ms thread switch (later on a loaded machine): a stall that must be
  # seen runs long enough for several switches there.
  #
  # Spins for `seconds` of this thread's CPU time, not of the clock's: a
  # machine that runs the process a tenth of the time stretches the stall
  # tenfold instead of leaving the watchdog, which needs the same machine,
  # a shorter share of it (a 0.3 s spin by the clock went unreported at a
  # load of 20 on 2 cores).
  def busy(seconds)
    seconds *= 3 if ruby_loop? && seconds >= THRESHOLD
    t = cpu_time
    nil while cpu_time - t < seconds
  end

  def cpu_time = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)

  # The spin of the tests that must see a report at its own line (busy's
  # seconds for 0.3 s: three times that on the Ruby loop; a 0.3 s spin by
  # the clock went unreported there with both cores busy).
  def spin = ruby_loop? ? 0.9 : 0.3

  # Runs the block as Farce.run's first fiber with stall detection on;
  # returns the reports.
  def reports_of(**options, &block)
    reports = []
    Farce.run(backend: backend, stall_threshold: THRESHOLD, on_stall: ->(r) { reports << r }, **options, &block)
    reports
  end

  # The report's first frame in this file.
  def app_frame(report)
    report.backtrace.find { |frame| frame.start_with?("#{__FILE__}:") }
  end

  def test_a_busy_fiber_is_reported_once_at_its_line
    line = nil
    reports = reports_of do
      Fiber.schedule do
        limit = spin
        t = cpu_time
        line = __LINE__ + 1
        nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < limit
        sleep 0.001
      end
      3.times { sleep 0.01 }
    end
    assert_equal 1, reports.size, reports.inspect
    report = reports.first
    assert_operator report.duration, :>=, THRESHOLD
    assert_kind_of Fiber, report.fiber
    frame = app_frame(report)
    refute_nil frame, report.backtrace.inspect
    assert_match(/:#{line}:/, frame)
    assert_includes report.to_s, "held the event loop"
  end

  # A scheduler made in one thread and used in another: the loop moves to
  # the thread that uses it, and the stall signal follows,
  # so the sample is that thread's fiber, taken where it was stuck.
  def test_a_loop_moved_to_another_thread_is_sampled_there
    reports = []
    line = nil
    scheduler = Farce::Scheduler.new(backend: backend, stall_threshold: THRESHOLD, on_stall: ->(r) { reports << r })
    Thread.new do
      Fiber.set_scheduler(scheduler)
      Fiber.schedule do
        limit = spin
        t = cpu_time
        line = __LINE__ + 1
        nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < limit
        sleep 0.001
      end
    ensure
      Fiber.set_scheduler(nil)
    end.join
    assert_equal 1, reports.size, reports.inspect
    frame = app_frame(reports.first)
    refute_nil frame, reports.first.backtrace.inspect
    assert_match(/:#{line}:/, frame)
  end

  # A loaded machine may stop the whole process for longer than the
  # threshold in the middle of a fiber's 2 ms step (it did, at a load of 20
  # on 2 cores): that turn did hold the loop that long, and its report is
  # right. The fibers stamp the clock around every step, so such a stop
  # shows as a gap between two stamps; each report needs one.
  def test_no_report_when_every_fiber_yields_in_time
    stats = nil
    stamps = []
    reports = reports_of do
      10.times do
        Fiber.schedule do
          20.times do
            stamps << monotonic
            busy(0.002)
            stamps << monotonic
            sleep 0
          end
        end
      end
      sleep 0.05
      stats = Fiber.scheduler.stats
    end
    stopped = stamps.each_cons(2).map { |a, b| b - a }.select { |gap| gap >= THRESHOLD / 2 }
    assert_operator reports.size, :<=, stopped.size,
                    "reports #{reports.map(&:duration).inspect}, but the process stopped only #{stopped.inspect}"
    assert_operator stats[:stalls], :<=, reports.size # (taken before the last turns ended)
    assert_in_delta THRESHOLD, stats[:stall_threshold], 1e-9
  end

  def test_a_stall_inside_a_c_call_holding_the_gvl_is_reported_when_it_returns
    skip "Ruby #{RUBY_VERSION} (3.4 and later) runs zlib through blocking_operation_wait, off the loop" if RUBY_VERSION >= "3.4"
    data = Random.new(1).bytes(40_000_000)
    line = nil
    reports = reports_of do
      Fiber.schedule do
        line = __LINE__ + 1
        Zlib::Deflate.deflate(data, Zlib::BEST_COMPRESSION)
        sleep 0.001
      end
    end
    assert_equal 1, reports.size
    assert_operator reports.first.duration, :>=, THRESHOLD
    assert_match(/:#{line}:/, app_frame(reports.first).to_s, reports.first.backtrace.inspect)
  end

  # One C call that keeps the GVL for the whole stall (Array#sort of
  # floats; sqlite3's busy wait is another), in a fiber that ends right
  # after it, and in one that parks right after it. The native loop's
  # watchdog runs without the GVL; the Ruby loop's is a thread, which got
  # the GVL only as the call returned, first slept, and found the turn over:
  # no report at all. Now it looks before it sleeps, and the loop reports a
  # turn that lasted the threshold without a sample when it ends. Either
  # way: one report per stall, naming the fiber that held the loop.
  def test_a_stall_in_one_c_call_is_reported_when_the_fiber_ends_or_parks_right_after
    floats = Random.new(3).then { |random| Array.new(3_000_000) { random.rand } }
    sorters = []
    reports = reports_of do
      r, w = IO.pipe
      sorters << Fiber.schedule { floats.sort }
      sorters << Fiber.schedule { floats.sort; r.read(1) }
      Fiber.schedule { w.write("x") }
    end
    assert_equal 2, reports.size, reports.inspect
    assert_equal sorters, reports.map(&:fiber)
    reports.each do |report|
      assert_operator report.duration, :>=, THRESHOLD
      assert_kind_of Array, report.backtrace
      assert(report.backtrace.all?(String), report.backtrace.inspect)
      assert_match(/\Afarce: a fiber held the event loop for \d+(\.\d+)? ms/, report.to_s)
    end
  end

  # The Ruby loop's report of a stall its watchdog thread could not sample
  # (it never got the GVL while the turn lasted: here it is stopped): the
  # fiber that ran when the turn passed the threshold, not the one that
  # started it (the thread's own, at Fiber.schedule), the turn's duration,
  # and no backtrace, as the native loop reports a stall it could not
  # sample.
  def test_the_ruby_loop_reports_a_stall_its_watchdog_could_not_sample
    skip "the Ruby loop's watchdog thread (FARCE_BACKEND=ruby)" unless ruby_loop?
    busy_fiber = nil
    reports = reports_of do
      Fiber.scheduler.instance_variable_get(:@ruby_loop).instance_variable_get(:@stall_watchdog).kill.join
      Fiber.schedule { busy(0.001) }
      busy_fiber = Fiber.schedule { busy(THRESHOLD * 2) } # (3x on the Ruby loop: busy)
      Fiber.schedule { busy(0.001) }
    end
    assert_equal 1, reports.size, reports.inspect
    report = reports.first
    assert_same busy_fiber, report.fiber
    assert_operator report.duration, :>=, THRESHOLD
    assert_equal [], report.backtrace
    assert_match(/\Afarce: a fiber held the event loop for \d+(\.\d+)? ms \(stall threshold exceeded\)\z/, report.to_s)
  end

  def test_stats_have_load_and_counts
    stats = nil
    reports_of do
      Fiber.schedule { busy(0.3); sleep 0.001 }
      sleep 0.2
      stats = Fiber.scheduler.stats
    end
    assert_equal 1, stats[:stalls]
    assert_operator stats[:idle_seconds], :>=, 0
    assert_operator stats[:busy_seconds], :>=, 0.25
    assert_operator stats[:load], :>, 0
    assert_operator stats[:load], :<=, 1
    assert_operator stats[:iterations], :>, 0
  end

  # Wake-up latency (ready -> running) from the core's histogram: the fiber
  # whose timer fell due while another held the loop for 0.3 s waited that long.
  # (The histogram is kept from the first stats call on: test_wakeup_latency.rb.)
  def test_wakeup_latency_percentiles
    stats = nil
    Farce.run(backend: backend) do
      Fiber.scheduler.stats # the histogram is kept from the first stats call on
      done = 0
      20.times { Fiber.schedule { 5.times { sleep 0.001 }; done += 1 } }
      Fiber.schedule { sleep 0.001 }
      Fiber.schedule { busy(0.3) }
      # until the 100 sleeps are over (a fixed 0.05 s was too short for the
      # 80 after the stall on a loaded machine)
      sleep 0.01 until done == 20
      sleep 0.001 # the core takes a batch's resume stamps at the poll after it
      stats = Fiber.scheduler.stats
    end
    assert_operator stats[:wakeups], :>=, 100
    assert_operator stats[:wakeup_p50], :>=, 0
    assert_operator stats[:wakeup_p50], :<=, stats[:wakeup_p90]
    assert_operator stats[:wakeup_p90], :<=, stats[:wakeup_p99]
    assert_operator stats[:wakeup_p99], :<=, stats[:wakeup_max]
    assert_operator stats[:wakeup_max], :>=, 0.2, "a timer due during the 0.3 s stall woke that late"
  end

  def test_off_by_default_and_switchable
    with = nil
    Farce.run(backend: backend) do
      assert_nil Fiber.scheduler.stats[:stall_threshold]
      reports = []
      Fiber.scheduler.on_stall = ->(r) { reports << r }
      Fiber.scheduler.stall_threshold = THRESHOLD
      Fiber.schedule { busy(0.3); sleep 0.001 }
      sleep 0.01
      Fiber.scheduler.stall_threshold = nil
      Fiber.schedule { busy(0.3); sleep 0.001 }
      sleep 0.01
      with = reports
    end
    assert_equal 1, with.size
  end

  def test_bad_options_raise
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: backend, stall_threshold: -1) }
    assert_raises(ArgumentError) { Farce::Scheduler.new(backend: backend, on_stall: 42) }
  end

  def test_an_exception_from_on_stall_is_reported_not_raised
    out, status = ruby_subprocess(<<~RUBY)
      require "farce"
      def busy(s) = (t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID); nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < s)
      Farce.run(backend: :#{backend}, stall_threshold: 0.1, on_stall: ->(r) { raise "boom" }) do
        Fiber.schedule { busy(0.3); sleep 0.001 }
      end
      puts "finished"
    RUBY
    assert status.success?, out
    assert_match(/on_stall raised RuntimeError: boom/, out)
    assert_match(/^finished$/, out)
  end

  # FARCE_STALL_MS turns it on, and the default on_stall warns one line.
  def test_environment_and_default_report
    out, status = ruby_subprocess(<<~RUBY, env: { "FARCE_STALL_MS" => "100" })
      require "farce"
      def busy(s) = (t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID); nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < s)
      Farce.run(backend: :#{backend}) do
        Fiber.schedule do
          busy(0.3) # the busy line
          sleep 0.001
        end
      end
    RUBY
    assert status.success?, out
    lines = out.lines.grep(/held the event loop/)
    assert_equal 1, lines.size, out
    assert_match(/for \d+(\.\d+)? ms at -e:(2|5):in/, lines.first)
  end

  # The watchdog's ticker is the first Go timer a process sets. Go opens its
  # own poller (an epoll descriptor and an eventfd, for good) on the first
  # timer, so before the core opened it at load, a scheduler with stall
  # detection left two descriptors behind that looked like its own (CI's leak
  # check saw them after another test's scheduler closed). A fresh process:
  # in this one some earlier test may have opened the poller already.
  def test_a_scheduler_watching_for_stalls_leaves_no_descriptor_open
    skip "no /proc/self/fd" unless File.directory?("/proc/self/fd")
    out, status = ruby_subprocess(<<~RUBY)
      require "farce"
      def fds = Dir.children("/proc/self/fd").map { |fd| File.readlink("/proc/self/fd/\#{fd}") rescue "closed" }.sort
      Farce.run(backend: :#{backend}) { sleep 0.001 } # loads the core
      before = fds
      Farce.run(backend: :#{backend}, stall_threshold: 0.05, on_stall: ->(_) {}) do
        Fiber.schedule { sleep 0.12 } # a few of the watchdog's ticks
      end
      puts "left open: \#{(after = fds).size - before.size} \#{after.inspect} against \#{before.inspect}"
    RUBY
    assert status.success?, out
    assert_match(/^left open: 0 /, out)
  end

  # A child of a process whose Go core ran gets its own core (and watchdog);
  # trapped signals still reach Ruby while stall detection is on.
  def test_after_fork_and_with_signals
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      def busy(s) = (t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID); nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < s)
      def run_once(label)
        reports = []
        trapped = 0
        trap("USR2") { trapped += 1 }
        Farce.run(backend: :#{backend}, stall_threshold: 0.1, on_stall: ->(r) { reports << r }) do
          # 0.5 s, five thresholds: the Ruby loop's watchdog is a Ruby thread,
          # which a loaded machine may run late
          Fiber.schedule { busy(0.5); sleep 0.001 }
          Fiber.schedule { 5.times { Process.kill(:USR2, Process.pid); sleep 0.01 } }
        end
        sleep 0.01 until trapped == 5
        puts "\#{label} reports=\#{reports.size} trapped=\#{trapped}"
        $stdout.flush
      end
      run_once("parent")
      pid = fork { run_once("child"); exit!(0) }
      Process.wait(pid)
      puts "child status=\#{$?.exitstatus}"
    RUBY
    assert status.success?, out
    assert_match(/^parent reports=1 trapped=5$/, out)
    assert_match(/^child reports=1 trapped=5$/, out)
    assert_match(/^child status=0$/, out)
  end

  # The io-event selector: a fiber that holds the loop fiber past the
  # threshold is reported when it transfers back.
  def test_selector_reports_a_busy_fiber
    skip_on_ruby_loop "the selector always runs on the native core"
    loop_fiber = Fiber.current
    selector = Farce::IOEventSelector.new(loop_fiber)
    reports = []
    selector.on_stall = ->(r) { reports << r }
    selector.stall_threshold = THRESHOLD
    line = nil
    fiber = Fiber.new do
      t = cpu_time
      line = __LINE__ + 1
      nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < 0.3
      selector.transfer
    end
    selector.push(fiber)
    selector.select(0) # starts the core (and its watchdog), runs the fiber
    selector.select(0)
    assert_equal 1, reports.size
    assert_operator reports.first.duration, :>=, THRESHOLD
    assert_match(/:#{line}:/, app_frame(reports.first).to_s)
    assert_equal 1, selector.stats[:stalls]
  ensure
    selector&.close
  end
end
