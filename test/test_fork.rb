# frozen_string_literal: true

require_relative "test_helper"
require "tmpdir"

# Fork rules of docs/cgo-hazards.md (rules 6 and 7). Every case runs in a child Ruby so
# that the test process's own Go runtime does not interfere.
class TestFork < Minitest::Test
  def test_require_starts_no_go_runtime_and_no_thread
    skip_on_ruby_loop "never loads the Go library"
    out, status = ruby_subprocess(<<~RUBY)
      threads_before = Dir.children("/proc/self/task").size
      require "farce"
      threads_after = Dir.children("/proc/self/task").size
      maps = File.read("/proc/self/maps")
      puts "loaded=\#{Farce.core_loaded?} threads=\#{threads_after - threads_before} mapped=\#{maps.include?("libfarce_core")}"
      Farce::Scheduler.new.close
      puts "after_new loaded=\#{Farce.core_loaded?} mapped=\#{File.read("/proc/self/maps").include?("libfarce_core")}"
    RUBY
    assert status.success?, out
    assert_match(/loaded=false threads=0 mapped=false/, out)
    assert_match(/after_new loaded=true mapped=true/, out)
  end

  def test_workers_forked_from_a_master_that_only_required_farce
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      pids = 10.times.map do |i|
        fork do
          r = Farce.run do
            rd, wr = IO.pipe
            Fiber.schedule { sleep 0.01; wr.write("w\#{i}") }
            rd.read(1 + i.to_s.size)
          end
          exit!(r == "w\#{i}" ? 0 : 1)
        end
      end
      ok = pids.map { |pid| Process.wait2(pid)[1].success? }
      puts "workers ok: \#{ok.count(true)}/\#{ok.size}"
    RUBY
    assert status.success?, out
    assert_match(%r{workers ok: 10/10}, out)
  end

  WORKLOAD = File.expand_path("support/fork_workload.rb", __dir__)

  def test_child_of_a_started_runtime_gets_an_inert_inherited_scheduler_and_a_fresh_core
    skip_on_ruby_loop "starts no Go runtime (test_ruby_loop.rb covers its fork)"
    out, status = ruby_subprocess(child_script("fork_inert_inherited_scheduler"), timeout: 30)
    assert status.success?, out
    assert_match(/closed=true/, out)
    assert_match(/loaded_before_new=false/, out)
    assert_match(/stats: Farce::Error before fork/, out)
    assert_match(/close kept descriptors=true/, out)
    assert_match(/new works: (epoll|poll|io_uring)/, out)
    assert_match(/generation=1 pid_is_child=true copy=(memfd|tmpfile) runtimes=2/, out)
    assert_match(/inherited still inert=true/, out)
    assert_match(/child exit 0/, out)
    assert_match(/parent: file generation=0 still works: (epoll|poll|io_uring)/, out)
  end

  # The issue's acceptance test: a parent that ran Farce.run, then 100
  # children (10 at a time) each running the whole workload on its own copy.
  def test_hundred_children_of_a_started_runtime_run_the_fiber_workload
    skip_on_ruby_loop "loads no copies of the Go core"
    out, status = ruby_subprocess(child_script("fork_hundred_children", WORKLOAD: WORKLOAD), timeout: 300)
    assert status.success?, out
    assert_match(%r{children ok: 100/100}, out)
  end

  # Each generation forks the next after running the workload itself, and
  # each loads its own copy of the core.
  def test_grandchildren_three_generations_deep_run_the_fiber_workload
    skip_on_ruby_loop "loads no copies of the Go core"
    out, status = ruby_subprocess(<<~RUBY, timeout: 120)
      require #{WORKLOAD.inspect}
      def generation(depth, fanout)
        info = ForkWorkload.run("depth\#{depth}")
        line = "depth=\#{depth} generation=\#{info[:generation]} kind=\#{info[:kind]} " \\
               "runtimes=\#{info[:runtimes_mapped]} own=\#{info[:pid] == Process.pid}"
        $stdout.write("\#{line}\\n") # one write: siblings share stdout
        $stdout.flush
        return true if depth == 3

        pids = fanout.times.map { fork { exit!(generation(depth + 1, fanout) ? 0 : 1) } }
        pids.all? { |pid| Process.wait2(pid)[1].success? }
      rescue Exception => e
        $stdout.write("depth=\#{depth} error \#{e.class}: \#{e.message}\\n")
        $stdout.flush
        false
      end
      puts "tree ok=\#{generation(0, 2)}"
    RUBY
    assert status.success?, out
    assert_match(/tree ok=true/, out)
    assert_match(/depth=0 generation=0 kind=file runtimes=1 own=true/, out)
    { 1 => 2, 2 => 4, 3 => 8 }.each do |depth, count|
      lines = out.scan(/^depth=#{depth} generation=#{depth} kind=(?:memfd|tmpfile) runtimes=#{depth + 1} own=true$/)
      assert_equal count, lines.size, "processes at depth #{depth}:\n#{out}"
    end
    refute_match(/error/, out)
  end

  # A child forked inside a fiber runs on in that fiber: its inherited
  # scheduler is removed (lib/farce/fork.rb), so its code does plain blocking
  # I/O, and Farce.run in it gets a fresh core. With and without a block.
  def test_child_forked_inside_a_fiber_does_plain_io_and_can_run_farce_again
    skip_on_ruby_loop "loads no copies of the Go core"
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      r, w = IO.pipe
      child_work = lambda do |tag|
        w.write("\#{tag}: write ok scheduler=\#{Fiber.scheduler.inspect}\n")
        sleep 0.01
        q = Queue.new
        Thread.new { sleep 0.01; q << :queued }
        w.write("\#{tag}: \#{q.pop}\n")
        x = Farce.run { Fiber.schedule { sleep 0.01 }; :nested }
        w.write("\#{tag}: \#{x} on \#{Farce.core_info.values_at(:kind, :generation).join('/')}\n")
      end
      Farce.run(backend: ENV.fetch("FARCE_BACKEND", "auto").to_sym) do
        Fiber.schedule do
          pid = fork { child_work.call("block") }
          w.write("block exit \#{Process.wait2(pid)[1].exitstatus}\n")
          pid = fork
          if pid.nil?
            child_work.call("bare")
            exit!(0)
          end
          w.write("bare exit \#{Process.wait2(pid)[1].exitstatus}\n")
        end
      end
      w.close
      print r.read
    RUBY
    assert status.success?, out
    %w[block bare].each do |tag|
      assert_match(/^#{tag}: write ok scheduler=nil$/, out)
      assert_match(/^#{tag}: queued$/, out)
      assert_match(%r{^#{tag}: nested on (memfd|tmpfile)/1$}, out)
      assert_match(/^#{tag} exit 0$/, out)
    end
  end

  # Two generations of Go SIGSEGV handlers sit before Ruby's in the chain: a
  # guard-page overflow in a grandchild must still be Ruby's SystemStackError,
  # and the thread must still take Thread#raise afterwards (the handlers'
  # sa_mask is cleared after each copy starts; docs/cgo-hazards.md).
  def test_stack_overflow_in_a_grandchild_is_still_a_system_stack_error
    skip_on_ruby_loop "loads no copies of the Go core"
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      def deep(n) = deep(n + 1) + 1
      Farce.run { sleep 0.001 }
      pid = fork do
        Farce.run { sleep 0.001 }
        grandchild = fork do
          Farce.run { sleep 0.001 }
          overflow = begin
            deep(0)
          rescue SystemStackError
            :system_stack_error
          end
          main = Thread.current
          Thread.new { sleep 0.02; main.raise(RuntimeError, "delivered") }
          raised = begin
            Farce.run { sleep 5 }
          rescue RuntimeError => e
            e.message
          end
          puts "generation=\#{Farce.core_info[:generation]} overflow=\#{overflow} thread_raise=\#{raised}"
          $stdout.flush
          exit!(0)
        end
        exit!(Process.wait2(grandchild)[1].success? ? 0 : 1)
      end
      puts "exit \#{Process.wait2(pid)[1].exitstatus}"
    RUBY
    assert status.success?, out
    assert_match(/generation=2 overflow=system_stack_error thread_raise=delivered/, out)
    assert_match(/exit 0/, out)
  end

  # Siblings map the one memfd copy their parent prepared at its first fork
  # (its pages are shared, not copied per child); the parent holds it in one
  # close-on-exec descriptor; a child whose program closed that descriptor
  # makes its own copy.
  def test_siblings_share_the_copy_their_parent_prepared
    skip_on_ruby_loop "loads no copies of the Go core"
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      def memfds = Dir.children("/proc/self/fd").select { |f| (File.readlink("/proc/self/fd/\#{f}") rescue "").include?("farce-core") }
      def copy_inode = File.read("/proc/self/maps").lines.grep(/farce-core/).first.split[4]
      Farce.run { sleep 0.001 }
      before = memfds.size
      r, w = IO.pipe
      pids = 3.times.map do
        fork do
          Farce.run { sleep 0.001 }
          w.write("sibling inode=\#{copy_inode} shared=\#{Farce.core_info[:shared_with_siblings]} left=\#{memfds.size}\n")
          exit!(0)
        end
      end
      pids << fork do
        memfds.each { |f| IO.for_fd(f.to_i).close } # as a daemonizing child closing every descriptor would
        Farce.run { sleep 0.001 }
        w.write("closer inode=\#{copy_inode} shared=\#{Farce.core_info[:shared_with_siblings]}\n")
        exit!(0)
      end
      w.close
      pids.each { |pid| Process.wait(pid) }
      print r.read
      fd = memfds.first
      puts "parent memfds before=\#{before} after=\#{memfds.size} cloexec=\#{IO.for_fd(fd.to_i, autoclose: false).close_on_exec?}"
    RUBY
    assert status.success?, out
    siblings = out.scan(/^sibling inode=(\d+) shared=true left=0$/).flatten
    assert_equal 3, siblings.size, out
    assert_equal 1, siblings.uniq.size, "the siblings map the same file:\n#{out}"
    closer = out[/^closer inode=(\d+) shared=false$/, 1]
    refute_nil closer, out
    refute_equal siblings.first, closer
    assert_match(/^parent memfds before=0 after=1 cloexec=true$/, out)
  end

  # dlopen matches names before files: a child that reuses its parent's
  # descriptor number for the memfd must still get a new copy, not the
  # parent's (dead) one loaded under the same "/proc/self/fd/N". Nothing here
  # opens descriptors between generations, so the numbers repeat.
  def test_each_generation_maps_its_own_copy_even_when_descriptor_numbers_repeat
    skip_on_ruby_loop "loads no copies of the Go core"
    out, status = ruby_subprocess(<<~RUBY, timeout: 60)
      require "farce"
      def copies = File.read("/proc/self/maps").lines.grep(/libfarce_core|farce-core/).map { |l| l.split[5..].join(" ") }.uniq
      def level(depth)
        Farce::Scheduler.new.close
        info = Farce.core_info
        puts "depth=\#{depth} generation=\#{info[:generation]} copies=\#{copies.size}"
        $stdout.flush
        return Farce.run { Fiber.schedule { sleep 0.001; GC.start }; :ran } == :ran if depth == 3

        pid = fork { exit!(level(depth + 1) ? 0 : 1) }
        Process.wait2(pid)[1].success?
      end
      puts "chain ok=\#{level(0)}"
    RUBY
    assert status.success?, out
    (0..3).each { |depth| assert_match(/^depth=#{depth} generation=#{depth} copies=#{depth + 1}$/, out) }
    assert_match(/chain ok=true/, out)
  end

  # Signals sent one at a time while the child's loop is parked: every
  # trap runs (each signal waits for the previous trap, so none coalesce);
  # then a storm of mixed signals from the parent, and the child still
  # answers TERM. A hang fails on the subprocess timeout.
  def test_signal_storm_in_a_child_runs_every_trap
    skip_on_ruby_loop "loads no copies of the Go core"
    out, status = ruby_subprocess(child_script("fork_signal_storm_in_a_child", WORKLOAD: WORKLOAD), timeout: 120)
    assert status.success?, out
    assert_match(/ready=ready/, out)
    assert_match(/USR1=500\b/, out)
    %w[USR2 HUP INT].each { |sig| assert_match(/#{sig}=[1-9]\d*/, out) }
    assert_match(/child exit 0/, out)
  end

  # A refused memfd (FARCE_CORE_COPY=tmpfile skips it, as vm.memfd_noexec=2
  # or a seccomp filter would): the unlinked private copy, nothing left on disk.
  def test_refused_memfd_falls_back_to_an_unlinked_copy
    skip_on_ruby_loop "loads no copies of the Go core"
    Dir.mktmpdir("farce-copy") do |dir|
      env = { "FARCE_CORE_COPY" => "tmpfile", "FARCE_CORE_COPY_DIRS" => "/nonexistent-farce:#{dir}" }
      out, status = ruby_subprocess(<<~RUBY, timeout: 60, env: env)
        require #{WORKLOAD.inspect}
        ForkWorkload.run("parent")
        pid = fork do
          info = ForkWorkload.run("child")
          grandchild = fork { exit!(ForkWorkload.run("grandchild")[:kind] == :tmpfile ? 0 : 1) }
          puts "child kind=\#{info[:kind]} mapped=\#{info[:mapped_as]}"
          puts "grandchild ok=\#{Process.wait2(grandchild)[1].success?}"
          puts "maps deleted=\#{File.read("/proc/self/maps").include?(info[:mapped_as] + " (deleted)")}"
          $stdout.flush
          exit!(0)
        end
        puts "child exit \#{Process.wait2(pid)[1].exitstatus}"
      RUBY
      assert status.success?, out
      assert_match(%r{child kind=tmpfile mapped=#{Regexp.escape(dir)}/\.farce-core-\d+-\w+}, out)
      assert_match(/grandchild ok=true/, out)
      assert_match(/maps deleted=true/, out)
      assert_match(/child exit 0/, out)
      assert_empty Dir.children(dir), "the private copies are unlinked once loaded"
    end
  end

  # A real refusal: a directory on a tmpfs mounted noexec (in a private
  # mount namespace; needs root, as CI has) refuses the mapping, the next
  # directory takes the copy; with the noexec one alone, the error names it.
  def test_noexec_directory_is_refused_and_the_next_one_used
    skip_on_ruby_loop "loads no copies of the Go core"
    skip "needs root to mount a noexec tmpfs" unless Process.uid.zero? && system("unshare -m true 2>/dev/null")
    Dir.mktmpdir("farce-noexec") do |noexec|
      Dir.mktmpdir("farce-exec") do |exec_dir|
        code = <<~RUBY
          require "farce"
          Farce.run { sleep 0.001 }
          pid = fork do
            begin
              Farce.run { sleep 0.001 }
              puts "loaded \#{Farce.core_info[:mapped_as]}"
            rescue Farce::Error => e
              puts "error: \#{e.message}"
            end
            $stdout.flush
            exit!(0)
          end
          Process.wait(pid)
        RUBY
        script = File.join(exec_dir, "child.rb")
        File.write(script, code)
        run = lambda do |dirs|
          shell = "mount -t tmpfs -o noexec tmpfs #{noexec} && exec #{RbConfig.ruby} -I #{FarceTestHelper::LIB} #{script}"
          env = { "FARCE_CORE_COPY" => "tmpfile", "FARCE_CORE_COPY_DIRS" => dirs, "FARCE_REQUIRE_NATIVE" => "1" }
          out = IO.popen(env, ["timeout", "-s", "KILL", "60", "unshare", "-m", "sh", "-c", shell], err: %i[child out], &:read)
          [out, $?]
        end
        out, status = run.call("#{noexec}:#{exec_dir}")
        assert status.success?, out
        assert_match(%r{^loaded #{Regexp.escape(exec_dir)}/\.farce-core-}, out)
        out, status = run.call(noexec)
        assert status.success?, out
        assert_match(%r{^error: .*Tried: #{Regexp.escape(noexec)}: #{Regexp.escape(noexec)}/\.farce-core-\d+-\w+: failed to map segment}, out)
      end
    end
  end

  # Nowhere to put a copy: Farce::Error names every place and its reason and
  # says how to fix it; the inherited scheduler stays inert.
  def test_refused_everywhere_raises_naming_every_reason
    skip_on_ruby_loop "loads no copies of the Go core"
    begin
      # FARCE_REQUIRE_NATIVE: raise rather than fall back to the Ruby loop
      env = { "FARCE_CORE_COPY" => "tmpfile", "FARCE_CORE_COPY_DIRS" => "/nonexistent-farce:/proc",
              "FARCE_REQUIRE_NATIVE" => "1" }
      out, status = ruby_subprocess(<<~RUBY, timeout: 60, env: env)
        require "farce"
        parent = Farce::Scheduler.new
        pid = fork do
          2.times do
            Farce.run { :never }
          rescue Farce::Error => e
            puts "error: \#{e.message}"
          end
          puts "inherited closed=\#{parent.closed?} info_failure=\#{!Farce.core_info[:last_failure].nil?} " \\
               "loaded=\#{Farce.core_loaded?}"
          $stdout.flush
          exit!(0)
        end
        puts "child exit \#{Process.wait2(pid)[1].exitstatus}"
        parent.close
      RUBY
      assert status.success?, out
      errors = out.lines.grep(/^error: /)
      assert_equal 2, errors.size, out
      assert_match(/forked child \(pid \d+, fork generation 1\)/, errors[0])
      assert_match(%r{/nonexistent-farce: cannot create a file: No such file or directory}, errors[0])
      assert_match(%r{/proc: cannot create a file: }, errors[0])
      assert_match(/FARCE_CORE_COPY=tmpfile/, errors[0])
      assert_match(/vm\.memfd_noexec=0/, errors[0])
      assert_match(/FARCE_CORE_COPY_DIRS/, errors[0])
      assert_match(/inherited closed=true info_failure=true loaded=false/, out)
      assert_match(/child exit 0/, out)
    end
  end

  # Without FARCE_REQUIRE_NATIVE, :auto in a child whose reload is refused
  # runs on the pure-Ruby loop, says so once on stderr, and fallback_reason
  # carries the loader's list of refusals.
  def test_refused_everywhere_falls_back_to_the_ruby_loop_for_auto
    skip_on_ruby_loop "loads no copies of the Go core"
    # :auto (FARCE_BACKEND unset): a named backend would raise instead
    env = { "FARCE_CORE_COPY" => "tmpfile", "FARCE_CORE_COPY_DIRS" => "/nonexistent-farce", "FARCE_BACKEND" => nil }
    out, status = ruby_subprocess(<<~RUBY, timeout: 60, env: env)
      require "farce"
      Farce.run { sleep 0.001 }
      pid = fork do
        s = Farce::Scheduler.new
        puts "backend=\#{s.backend} reason=\#{s.fallback_reason}"
        puts "run=\#{Farce.run { Fiber.schedule { sleep 0.001 }; :ok }}"
        $stdout.flush
        exit!(0)
      end
      puts "child exit \#{Process.wait2(pid)[1].exitstatus}"
    RUBY
    assert status.success?, out
    assert_match(%r{^backend=ruby reason=.*refused everywhere.*/nonexistent-farce: cannot create a file}, out)
    assert_match(/^run=ok$/, out)
    assert_equal 1, out.scan("running on the pure-Ruby loop").size, out
    assert_match(/child exit 0/, out)
  end
end
