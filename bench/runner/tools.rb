# frozen_string_literal: true

# The machine's side of a run: the tools a run needs (wrk, gnuplot, a built farce, descriptors
# enough) and child processes run with a deadline (capture, wait_or_kill).
module Bench
  class Runner
    def ensure_tools
      missing = { "wrk" => "wrk", "gnuplot" => "gnuplot-nox", "ss" => "iproute2" }.reject { |bin, _| which(bin) }
      return if missing.empty?

      if Process.uid.zero? && which("apt-get")
        pkgs = missing.values
        warn "bench: installing #{pkgs.join(' ')} with apt-get"
        system("apt-get", "install", "-y", *pkgs) ||
          (system("apt-get", "update") && system("apt-get", "install", "-y", *pkgs))
      end
      abort "bench: wrk is required (apt-get install -y wrk)" unless which("wrk")
      warn "bench: gnuplot not found; the plots will not be regenerated" unless which("gnuplot")
      warn "bench: ss not found; the HTTP rows' CPU per request will be over whole runs (bench/lib/steady_window.rb)" unless which("ss")
    end

    # wrk holds every connection of an HTTP case, and so does the server (which
    # raises its own soft limit to the hard one; wrk does not): both inherit the
    # limit raised here.
    def ensure_descriptors(kases)
      most = kases.select { |k| k.kind == :http }.map { |k| k.args[:connections] }.max
      return unless most

      limit = DescriptorLimit.raise_to(most + 1024)
      return if limit >= most + 64

      @notes << "only #{limit} descriptors per process (ulimit -n; could not raise it): wrk cannot hold #{most} " \
                "connections, see the rows' open connections and errors"
    end

    def which(bin)
      ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, bin) }.find { |p| File.executable?(p) }
    end

    def sid?
      File.executable?(@sid_run)
    end

    def ensure_built
      return if File.exist?(File.join(ROOT, "lib", "farce", RUBY_ABI, "farce_ext.so"))

      warn "bench: farce is not built for Ruby #{RUBY_ABI}; running rake compile"
      Dir.chdir(ROOT) { system(RbConfig.ruby, "-S", "rake", "compile") } || abort("bench: rake compile failed")
    end

    def capture(cmd, timeout)
      r, w = IO.pipe
      pid = Process.spawn(*cmd, out: w, err: File::NULL, in: File::NULL, pgroup: true, chdir: ROOT)
      w.close
      reader = Thread.new { r.read }
      status = wait_or_kill(pid, timeout)
      out = reader.value
      r.close
      status&.success? ? out : nil
    end

    # Waits for pid until timeout seconds have passed, then kills its process group.
    def wait_or_kill(pid, timeout, &tick)
      deadline = now + timeout
      loop do
        _, status = Process.waitpid2(pid, Process::WNOHANG)
        return status if status

        if now > deadline
          Process.kill(:KILL, -pid) rescue nil
          Process.waitpid2(pid) rescue nil
          return nil
        end
        tick&.call
        sleep 0.05
      end
    end
  end
end
