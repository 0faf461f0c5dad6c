# frozen_string_literal: true

require_relative "apps_helper"
require "open3"
require "tmpdir"

# Child processes the ways applications start them, from fibers at once:
# Open3.capture2/capture3, IO.popen, system, backticks, spawn with
# Process.wait, and Process.waitall; with and without a trap("CHLD")
# handler, which programs that supervise children install. Each form's
# children (one per fiber) wait for one another (AppsSuite.rendezvous_sh): if the loop ran
# them one at a time, the first would wait alone and fail.
class AppsProcessesTest < Minitest::Test
  include ClientsSuite::Case

  FIBERS = 5
  FORMS = %w[capture3 capture2 popen system backticks spawn].freeze

  def test_each_form_from_ten_fibers
    clients_case("process", "Open3, popen, system, ``, spawn: #{FIBERS} fibers at once") do |c|
      forms_case(c)
    end
  end

  def test_each_form_from_ten_fibers_with_a_chld_trap
    clients_case("process", "the same with a trap(\"CHLD\") handler") do |c|
      signals = 0
      previous = trap("CHLD") { signals += 1 }
      begin
        forms_case(c)
      ensure
        trap("CHLD", previous || "DEFAULT")
      end
      assert_operator signals, :>, 0, "the CHLD handler never ran"
      c.note("CHLD handler ran #{signals} times for #{FIBERS * FORMS.size} children")
    end
  end

  def test_waitall_from_a_fiber
    clients_case("process", "Process.waitall in a fiber, #{FIBERS} children, trap(\"CHLD\")") do |c|
      signals = 0
      previous = trap("CHLD") { signals += 1 }
      ticks = 0
      ticking = true
      ticker = c.fiber do
        while ticking
          sleep 0.005
          ticks += 1
        end
      end
      Dir.mktmpdir do |dir|
        pids = Array.new(FIBERS) { |i| Process.spawn("sh", "-c", "#{AppsSuite.rendezvous_sh(dir, FIBERS)}; exit #{i + 1}") }
        before = ticks
        reaped = Process.waitall
        during = ticks - before # (the ticker's last tick comes when it is stopped)
        ticking = false
        ticker.value
        assert_equal pids.sort, reaped.map(&:first).sort
        assert_equal (1..FIBERS).to_a, reaped.sort_by { |pid, _| pids.index(pid) }.map { |_, status| status.exitstatus }
        assert_operator during, :>, 0, "no other fiber ran while waitall waited"
        c.note("#{during} ticks of another fiber during waitall")
      end
      assert_operator signals, :>, 0, "the CHLD handler never ran"
    ensure
      trap("CHLD", previous || "DEFAULT")
    end
  end

  # FIBERS fibers run FORMS in the same order; the k-th children of all the
  # fibers meet (rendezvous per form) before they answer. Each child prints
  # what it was and exits with a status of its own; both are checked.
  def forms_case(c)
    Dir.mktmpdir do |dir|
      FORMS.each { |form| Dir.mkdir(File.join(dir, form)) }
      meet = ->(form) { AppsSuite.rendezvous_sh(File.join(dir, form), FIBERS) }
      results = c.fibers(FIBERS) do |i|
        status = i % 4
        script = ->(form) { "#{meet.call(form)}; echo #{form} #{i}; exit #{status}" }
        out, err, st = Open3.capture3("sh", "-c", "#{script.call('capture3')}; echo oops >&2")
        capture3 = [out, err, st.exitstatus]
        out, st = Open3.capture2("sh", "-c", script.call("capture2"))
        capture2 = [out, st.exitstatus]
        popen = [IO.popen(["sh", "-c", script.call("popen")], &:read), $?.exitstatus]
        system("sh", "-c", script.call("system"), out: File::NULL)
        system_status = $?.exitstatus
        backticks = [`#{script.call('backticks')}`, $?.exitstatus]
        pid = Process.spawn("sh", "-c", script.call("spawn"), out: File::NULL)
        _, st = Process.wait2(pid)
        [capture3, capture2, popen, system_status, backticks, st.exitstatus]
      end
      expected = Array.new(FIBERS) do |i|
        status = i % 4
        [["capture3 #{i}\n", "", status], ["capture2 #{i}\n", status], ["popen #{i}\n", status], status,
         ["backticks #{i}\n", status], status]
      end
      assert_equal expected, results
    end
  end
end
