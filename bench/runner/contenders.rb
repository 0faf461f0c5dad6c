# frozen_string_literal: true

# Who runs: the contenders (NAME[+VAR=VALUE...][@RUBY]), which of them this machine can run,
# and the reference programs (C epoll ping-pong, Ruby floor).
module Bench
  class Runner
    PROBE = <<~'RUBY'
      $LOAD_PATH.unshift(File.join(Dir.pwd, "lib"))
      require "farce"
      (Farce.backends - [:auto]).each do |b|
        begin
          s = Farce::Scheduler.new(backend: b)
          s.close
          puts "ok #{b}"
        rescue StandardError, NotImplementedError => e
          puts "no #{b} #{e.class}: #{e.message.lines.first&.strip}"
        end
      end
    RUBY

    # NAME[+VAR=VALUE...][@RUBY] => [name, env, ruby version]
    def parse_contender(contender)
      base, ver = contender.split("@", 2)
      name, *settings = base.split("+")
      env = settings.to_h { |kv| kv.split("=", 2) }
      [name, env, ver || (name == "async" ? "3.3" : RUBY_ABI)]
    end

    def ruby_of(contender)
      parse_contender(contender)[2]
    end

    # The command that runs `ruby` of the given version (the host's, or one in the sid chroot).
    def ruby_command(ver)
      return [RbConfig.ruby] if ver == RUBY_ABI
      return [other_rubies[ver]] if other_rubies[ver]

      ["env", "SID_RUBY=#{ver}", @sid_run, "ruby"]
    end

    # Rubies run by path, outside the chroot (BENCH_RUBIES): version => ruby.
    def other_rubies
      @other_rubies ||= begin
        spec = ENV["BENCH_RUBIES"]
        pairs = spec ? spec.split(",").map { |kv| kv.strip.split("=", 2) } : DEFAULT_RUBIES.to_a
        pairs.select { |ver, path| ver && path && File.executable?(path) && !SID_RUBIES.include?(ver) }.to_h
      end
    end

    # Whether `ruby --yjit` of that version has YJIT (Debian's 3.3/3.4 do not).
    def yjit?(ver)
      return false if ENV["BENCH_YJIT"] == "0"

      @yjit ||= {}
      @yjit.fetch(ver) do
        @yjit[ver] = capture([*ruby_command(ver), "--yjit", "-e", "print RubyVM::YJIT.enabled?"], 120) == "true"
      end
    end

    # Debian's pure-Ruby Async (from the sid chroot) as a load path for a
    # Ruby outside the chroot, when it loads there on farce's selector.
    def async_path(ver)
      @async_path ||= {}
      @async_path.fetch(ver) do
        root = ENV.fetch("SID_ROOT", "/opt/rubies/sid")
        dirs = Dir[File.join(root, "usr/share/rubygems-integration/all/gems/*/lib")] +
               Dir[File.join(root, "usr/lib/x86_64-linux-gnu/rubygems-integration/*/gems/io-event-*/lib")].last(1)
        probe = 'require "farce/io_event"; ENV["IO_EVENT_SELECTOR"] = "Farce"; require "async"; ' \
                'print Sync { IO::Event::Selector.default.name }'
        out = dirs.empty? ? nil : capture(["env", "RUBYLIB=#{dirs.join(':')}", *ruby_command(ver), "-Ilib", "-e", probe], 120)
        @async_path[ver] = out.to_s.include?("Farce") ? dirs.join(":") : nil
      end
    end

    # io-event's native selector built for Ruby ver (.ci/io-event-build, cached
    # beside the built Rubies) from the peers' folder that FARCE_PEER_SUITES
    # names: the folder to put first on the load path, or nil. Not on 3.3,
    # where Debian's own build serves Async (the `async` contender).
    def io_event_ext(ver)
      @io_event_ext ||= {}
      @io_event_ext.fetch(ver) do
        @io_event_ext[ver] = nil
        if ver == "3.3"
          next nil
        elsif ENV["FARCE_PEER_SUITES"].to_s.empty?
          note = "FARCE_PEER_SUITES is not set: no Async on io-event's native EPoll outside Ruby 3.3 (async-epoll)"
          @notes << note unless @notes.include?(note)
          next nil
        end
        out = capture([File.join(ROOT, ".ci", "io-event-build"), ver], 900).to_s.lines.last.to_s.strip
        if out.empty? || !File.exist?(File.join(out, "IO_Event.so"))
          @notes << "io-event's C extension did not build for Ruby #{ver} (.ci/io-event-build #{ver}): no async-epoll@#{ver}"
          next nil
        end
        @io_event_ext[ver] = out
      end
    end

    def farce_built?(ver)
      File.exist?(File.join(ROOT, "lib", "farce", ver, "farce_ext.so"))
    end

    def async_on?(ver)
      sid? && capture([*ruby_command(ver), "-e", 'require "async"; print Async::VERSION'], 120).to_s.match?(/\A\d/)
    end

    # The same-Ruby headline first (farce and Async on 3.3, then 3.4), then the
    # extra rows: farce on the host's Ruby, farce without its Go scheduler
    # tick, farce with stall detection on, the pure-Ruby loop; with BENCH_EXTRA=1 more (they add
    # ~10 minutes to a full run).
    def discover_contenders
      if ENV["BENCH_CONTENDERS"]
        return ENV["BENCH_CONTENDERS"].split(",").map(&:strip).reject(&:empty?)
      end

      backends = []
      out = capture([RbConfig.ruby, "-e", PROBE], 60)
      out.to_s.each_line do |line|
        status, name, reason = line.split(" ", 3)
        if status == "ok"
          backends << name
        elsif status == "no"
          @notes << "farce backend :#{name} skipped (unavailable here: #{reason.strip})"
        end
      end
      @notes << "farce could not be loaded; no farce contender" if backends.empty?
      list = []
      rubies = sid? ? SID_RUBIES.select { |v| farce_built?(v) } : []
      (SID_RUBIES - rubies).each do |v|
        @notes << "farce is not built for Ruby #{v} (SID_RUBY=#{v} .ci/sid-run rake compile): no farce@#{v}"
      end
      SID_RUBIES.each do |v|
        list << "farce-epoll@#{v}" if rubies.include?(v) && backends.include?("epoll")
        if async_on?(v) && io_event_ext(v)
          list << "async-epoll@#{v}" # Debian's io-event has no native selector for this Ruby: the one built here
        elsif async_on?(v)
          list << "async@#{v}"
        else
          @notes << "Async on Ruby #{v} unavailable (#{@sid_run} or the async gem missing): no ratios on #{v}"
        end
      end
      list << "farce-epoll@#{RUBY_ABI}" if backends.include?("epoll")
      main = rubies.first || RUBY_ABI
      # io_uring beside epoll on the headline Ruby (and what :auto picks)
      list << "farce-io_uring@#{main}" if backends.include?("io_uring")
      # Rubies outside the chroot (BENCH_RUBIES): farce against its Ruby floor and threads
      other_rubies.each_key do |v|
        unless farce_built?(v)
          @notes << "farce is not built for Ruby #{v} (build it with that Ruby's rake compile): no farce@#{v}"
          next
        end
        list << "farce-epoll@#{v}" if backends.include?("epoll")
        list << "farce-io_uring@#{v}" if backends.include?("io_uring")
        list << "threads@#{v}"
        list << "threads+RUBY_MN_THREADS=1@#{v}" if v >= "3.3" # Ruby's M:N thread scheduler beside plain threads
        list << "async-epoll@#{v}" if async_path(v) && io_event_ext(v)
        if async_path(v)
          list << "async-farce@#{v}"
        else
          @notes << "Async on Ruby #{v}: Debian's pure-Ruby Async did not load there on farce's selector: no async-farce@#{v}"
        end
      end
      # YJIT twins (farce's epoll and io_uring, Async on native EPoll) on every Ruby whose `ruby --yjit` has it
      list.grep(/\A(farce-(epoll|io_uring)|async-epoll)@/).each do |c|
        name, _, v = parse_contender(c)
        if yjit?(v)
          list << "#{name}+#{YJIT}@#{v}"
        else
          note = "Ruby #{v} has no YJIT: no YJIT row for it"
          @notes << note unless @notes.include?(note)
        end
      end
      # farce before its Go scheduler tick (ext/farce/core/sched_tick.go), in the same run
      list << "farce-epoll+FARCE_SCHED_TICK=0@#{main}" if backends.include?("epoll")
      # what stall detection (the watchdog and the turn stamps) costs, in the same run
      list << "farce-epoll+FARCE_STALL_MS=100@#{main}" if backends.include?("epoll")
      # what the pure-Ruby loop (the fallback where the Go core cannot load) costs
      list << "farce-ruby@#{main}"
      # BENCH_EXTRA=1: the other backends, GOMAXPROCS=1, threads
      if ENV["BENCH_EXTRA"] == "1"
        list << "farce-poll@#{main}" if backends.include?("poll")
        list << "farce-epoll+GOMAXPROCS=1@#{main}" if backends.include?("epoll")
        list << "threads@#{main}"
      end
      list
    end

    # The reference programs of the ping-pong cases: the C epoll program
    # (built here with gcc) and the Ruby floor on every Ruby a contender uses.
    def discover_references(contenders)
      return [] if ENV["BENCH_REFERENCES"] == "0"

      refs = []
      if which("gcc")
        FileUtils.mkdir_p(RESULTS)
        ok = system("gcc", "-O2", "-o", C_PINGPONG, File.join(BENCH, "pingpong_epoll.c"))
        ok ? refs << "c-epoll" : @notes << "gcc failed to build bench/pingpong_epoll.c: no C reference row"
      else
        @notes << "gcc not found: no C reference row"
      end
      refs + contenders.map { |c| floor_of(c) }.uniq
    end

    # The Ruby floor a contender is measured against: same Ruby, YJIT the same.
    def floor_of(contender)
      _, env, ver = parse_contender(contender)
      env["RUBY_YJIT_ENABLE"] == "1" ? "ruby-floor+#{YJIT}@#{ver}" : "ruby-floor@#{ver}"
    end

    def reference?(contender)
      contender == "c-epoll" || contender.start_with?("ruby-floor")
    end
  end
end
