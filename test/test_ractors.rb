# frozen_string_literal: true

require_relative "test_helper"

# farce in Ractors other than the main one: each Ractor's threads run
# schedulers of their own, in parallel with the other Ractors'
# (docs/architecture.md, "Ractors"). Each test runs its Ractors in a child
# process (test/scripts/ractor_*.rb, on the suite's backend): Ractors change
# the whole process (every extension's methods are checked for Ractor
# safety from then on, and Ruby warns once), and a crash must fail one test,
# not end the suite.
class TestRactors < Minitest::Test
  # Ruby before 4.0 keeps one pool of fiber stacks for the whole process
  # and takes no lock around it: fibers made in two Ractors at once crash
  # the interpreter, farce or not (4 Ractors each making and resuming plain
  # fibers for 1.5 s, with or without GC.start meanwhile: a segmentation
  # fault or a corrupted fiber in 1 to 3 runs of 3 on each of 3.1, 3.2, 3.3
  # and 3.4; in none of 3 on 4.0 and 4.1).
  FIBERS_IN_PARALLEL = RUBY_VERSION >= "4.0"
  NO_PARALLEL_FIBERS = "Ruby #{RUBY_VERSION}'s fiber pool is shared by every Ractor without a lock: fibers " \
                       "made in two Ractors at once crash it without farce (fixed in 4.0)"

  # Ruby 3.4 crashes, farce or not, when a Ractor that has a thread of its
  # own switches fibers after earlier Ractors ran threads (6 Ractors with a
  # thread each, then Ractors resuming a plain fiber while a thread of
  # theirs sleeps: a segmentation fault in 3 runs of 3 on 3.4.11, in none on
  # 3.3, 4.0 or 4.1). farce's hooks start threads (the worker pool, the
  # timeout watcher, Process.wait and name lookups without a pidfd), and the
  # hook cases crashed there about one run in six.
  THREADS_AND_FIBERS = !RUBY_VERSION.start_with?("3.4.")

  def setup
    skip "Ruby #{RUBY_VERSION} has no Ractors" unless defined?(Ractor)
  end

  # The output of test/scripts/NAME.rb run on the suite's backend, which
  # must have ended well and said DONE. The scripts require
  # ractor_support.rb from SCRIPTS_DIR (they run as `ruby -e`).
  def run_script(name, timeout: 60, **parameters)
    out, status = ruby_subprocess(child_script(name, BACKEND: backend, SCRIPTS_DIR: SCRIPTS, **parameters),
                                  timeout: timeout)
    assert status.success?, "the child failed (#{status.inspect}):\n#{out}"
    assert_includes out, "DONE", out
    out
  end

  def line(out, tag)
    out[/^#{tag} (.*)$/, 1] or flunk("no #{tag} line in:\n#{out}")
  end

  # counts[key] from a Hash's inspect (`{pings: 3}` from Ruby 3.4 on,
  # `{:pings=>3}` before); -1 when it is not there.
  def count(counts, key)
    Integer(counts[/:?\b#{key}(?:=>|: )(\d+)/, 1] || -1)
  end

  def test_each_hook_works_in_a_ractor
    skip "Ruby #{RUBY_VERSION} crashes by itself when a Ractor with a thread switches fibers (see THREADS_AND_FIBERS)" unless THREADS_AND_FIBERS
    out = run_script("ractor_hooks")
    refute_match(/^FAILED/, out)
    assert_equal "[10, true]", line(out, "CASE sleep"), "ten fibers slept at once"
    assert_equal '"hello"', line(out, "CASE pipe")
    assert_equal "200", line(out, "CASE socket_ping_pong")
    assert_equal "[true, true]", line(out, "CASE tcp_accept_and_dns"), "20 clients accepted, each number read"
    assert_equal "[4950, 0]", line(out, "CASE queue_and_mutex"), "the sum of 0...100 popped; no fiber inside the Mutex with another"
    assert_equal "[:held_raised, :raised]", line(out, "CASE timeouts")
    assert_equal "[7, 5]", line(out, "CASE process_wait"), "the child's status; the ticker ticked meanwhile"
    assert_equal(RUBY_VERSION < "3.2" ? ":no_hook" : "1", line(out, "CASE io_select"))
    assert_equal '"3456"', line(out, "CASE worker_pool")
    assert_equal "[1, true]", line(out, "CASE stall"), "one stall reported, as long as it was"
  end

  # Four Ractors at once, with the GC (compacting too) forced in the main
  # Ractor meanwhile: every ping answered, every client accepted, timers
  # fired, and nothing left behind (descriptors, Ruby threads).
  def test_four_ractors_at_once_under_gc
    skip NO_PARALLEL_FIBERS unless FIBERS_IN_PARALLEL
    out = run_script("ractor_stress", RACTORS: 4, SECONDS: 1.5, timeout: 120)
    refute_match(/^FAILED/, out)
    rounds = out.scan(/^RACTOR (\d+) (.*)$/)
    assert_equal 8, rounds.size, "4 Ractors' counts in each of 2 rounds:\n#{out}"
    rounds.each do |i, counts|
      pings, pongs, connected, accepted, sleeps, threads =
        %w[pings pongs connected accepted sleeps threads_left].map { |key| count(counts, key) }
      assert_operator pings, :>, 0, "Ractor #{i}: #{counts}"
      assert_equal pings, pongs, "Ractor #{i}: every ping answered (#{counts})"
      assert_operator connected, :>=, 10, "Ractor #{i}: a burst at least (#{counts})"
      assert_equal connected, accepted, "Ractor #{i}: every client accepted and read (#{counts})"
      assert_operator sleeps, :>, 10, "Ractor #{i}: timers fired (#{counts})"
      assert_equal 0, threads, "Ractor #{i}: Ruby threads left at its end (#{counts})"
    end
    assert_operator line(out, "GCS")[/\d+/].to_i, :>, 0
    fds_before, fds_after = line(out, "FDS").split.map(&:to_i)
    assert_operator fds_after, :<=, fds_before, "descriptors left open:\n#{out}"
    tasks_before, tasks_after = line(out, "TASKS").split.map(&:to_i)
    # the second round's: the pools of native threads (Go's, Ruby's) grew
    # in the first; a leak per Ractor or per connection would grow again
    assert_operator tasks_after, :<=, tasks_before + 2, "native threads left running:\n#{out}"
  end

  # (Before Ruby 4.0 the other Ractor runs after the one that raised:
  # fibers in two Ractors at once crash those Rubies, see NO_PARALLEL_FIBERS.)
  def test_a_ractor_that_raises_unwinds_its_fibers_and_leaves_the_others_alone
    out = run_script("ractor_unwind_and_raise", AT_ONCE: FIBERS_IN_PARALLEL)
    assert_equal "ArgumentError the Ractor's run ends here", line(out, "RAISED")
    assert_equal "[:block, :mutex, :pipe, :queue, :sleep]", line(out, "UNWOUND"), "each parked fiber's ensure ran"
    assert_equal "300", line(out, "PINGS"), "the other Ractor's round trips all came back"
  end

  # Every constant under Farce can be read in any Ractor: Ruby refuses an
  # unshareable one there (Ractor::IsolationError), whatever uses it.
  def test_every_constant_is_shareable
    unshareable = []
    seen = {}
    walk = lambda do |mod|
      return if seen[mod]

      seen[mod] = true
      mod.constants(false).each do |name|
        next unless mod.const_defined?(name, false)

        value = mod.const_get(name, false)
        if value.is_a?(Module)
          walk.call(value) if value.name&.start_with?("Farce")
        elsif !Ractor.shareable?(value)
          unshareable << "#{mod}::#{name}"
        end
      end
    end
    walk.call(Farce)
    assert_empty unshareable
  end

  # Ruby before 3.4 runs a require in the calling Ractor: farce says why it
  # cannot load there (with RubyGems loaded, RubyGems' own require fails
  # first, so the child runs without it). From 3.4 on Ruby loads it in the
  # main Ractor, and a Ractor that requires farce first uses it at once.
  def test_require_in_a_ractor
    code = <<~RUBY
      Warning[:experimental] = false
      r = Ractor.new do
        require "farce"
        got = nil
        rd, wr = IO.pipe
        Farce.run(backend: #{backend.inspect}) { Fiber.schedule { got = rd.read(5) }; Fiber.schedule { wr.write("hello") } }
        got
      end
      begin
        puts "GOT \#{(r.respond_to?(:value) ? r.value : r.take).inspect}"
      rescue Ractor::RemoteError => e
        puts "ERROR \#{e.cause.class}: \#{e.cause.message}"
      end
    RUBY
    out, = ruby_subprocess(code, ruby_options: ["--disable-gems"])
    if RUBY_VERSION >= "3.4"
      assert_equal "GOT \"hello\"", out.lines.grep(/^(GOT|ERROR)/).first&.chomp, out
    else
      assert_match(/^ERROR Ractor::UnsafeError: farce: require it in the main Ractor before starting Ractors, because Ruby #{Regexp.escape(RUBY_VERSION)}/, out)
    end
  end
end
