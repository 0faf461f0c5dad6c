# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"
require_relative "../support/free_port"

module ClientsSuite
  # The database servers the real-clients suite talks to: PostgreSQL, MariaDB
  # and Redis from Debian's packages, each started here as a private instance
  # (its own data directory in one temporary directory, a free loopback TCP
  # port) and stopped by #stop. Nothing of the system's own instances is
  # used or touched: Debian may start those on install, on their usual
  # ports and sockets; these take other ports and keep every file in the
  # temporary directory.
  #
  # Every server runs under `setpriv --pdeathsig KILL`, so that even when the
  # process that started it is killed outright (no ensure, no at_exit), the
  # kernel ends the server too; #stop is the orderly way out.
  class Servers
    include FreePort

    PG_BIN = Dir["/usr/lib/postgresql/*/bin"].max_by { |d| d[/\d+/].to_i }
    # PostgreSQL refuses to run as root: it runs as this user, which
    # Debian's postgresql package creates.
    PG_USER = "postgres"
    DIR_PREFIX = "farce-clients-"
    READY_TIMEOUT = 60 # seconds a server may take to accept connections

    attr_reader :dir, :env, :timings

    def initialize
      @pids = {}
      @ready = {}
      @init_pids = {}
      @timings = {}
      @env = {}
    end

    # Starts the three servers (in parallel: initdb and mariadb-install-db are
    # the slow parts) and waits until each answers. Returns the environment
    # the test processes get (FARCE_CLIENTS_*).
    def start
      check_installed
      remove_abandoned_dirs
      @dir = Dir.mktmpdir(DIR_PREFIX)
      File.chmod(0o711, @dir) # the postgres user must reach its data directory below
      # The data directories are made in parallel (initdb and
      # mariadb-install-db are the slow part); the servers are spawned from
      # this thread: the kernel's parent-death signal follows the thread
      # that forked, and a helper thread's end would kill its server.
      @init_threads = [method(:init_postgres), method(:init_mariadb)].map do |init|
        Thread.new { Thread.current.report_on_exception = false; init.call } # join raises what it raised
      end
      @init_threads.each(&:join)
      start_postgres
      start_mariadb
      start_redis
      %i[postgres mariadb redis].each { |name| timed(:"#{name}_ready") { wait_ready(name) } }
      @env
    rescue Exception # rubocop:disable Lint/RescueException -- Ctrl-C while starting stops what started
      stop_init
      stop
      raise
    end

    # Stops every server that was started (fast shutdown, then KILL after 15 s)
    # and removes the temporary directory. Safe to call twice.
    def stop
      signals = { postgres: "INT", mariadb: "TERM", redis: "TERM" } # INT is PostgreSQL's fast shutdown
      @pids.each do |name, pid|
        Process.kill(signals.fetch(name), pid)
      rescue Errno::ESRCH
        nil
      end
      deadline = monotonic + 15
      @pids.each do |name, pid|
        loop do
          break if Process.waitpid(pid, Process::WNOHANG)
          if monotonic > deadline
            warn "clients: #{name} (pid #{pid}) did not stop in 15 s: killed"
            Process.kill("KILL", pid)
            Process.waitpid(pid)
            break
          end
          sleep 0.05
        end
      rescue Errno::ECHILD, Errno::ESRCH
        nil
      end
      @pids.clear
      FileUtils.rm_rf(@dir) if @dir
      @dir = nil
    end

    private

    # The temporary directories of runs that were killed outright (nothing
    # could remove them then): Dir.mktmpdir puts the creating pid in the name.
    def remove_abandoned_dirs
      Dir[File.join(Dir.tmpdir, "#{DIR_PREFIX}*")].each do |dir|
        pid = File.basename(dir)[/\A#{DIR_PREFIX}\d+-(\d+)-/o, 1]&.to_i
        next unless pid && pid != Process.pid

        begin
          Process.kill(0, pid)
        rescue Errno::ESRCH
          FileUtils.rm_rf(dir)
        rescue Errno::EPERM
          nil # alive, someone else's
        end
      end
    end

    # Ends initdb and mariadb-install-db if they still run (start was
    # interrupted), and waits for their threads, so that nothing writes into
    # the temporary directory after #stop removed it.
    def stop_init
      @init_pids.each_value do |pid|
        Process.kill("KILL", pid)
      rescue Errno::ESRCH
        nil
      end
      (@init_threads || []).each { |t| t.join(15) rescue nil } # rubocop:disable Style/RescueModifier -- their errors are moot now
    end

    def check_installed
      missing = []
      missing << "postgresql (no #{'/usr/lib/postgresql/*/bin'})" unless PG_BIN
      missing << "mariadb-server" unless File.executable?("/usr/sbin/mariadbd")
      missing << "redis-server" unless File.executable?("/usr/bin/redis-server")
      raise "clients: not installed: #{missing.join(', ')} (bin/setup installs them)" unless missing.empty?
    end

    def init_postgres
      @pg_data = File.join(@dir, "postgres")
      @pg_socket_dir = File.join(@dir, "postgres-socket")
      [@pg_data, @pg_socket_dir].each { |d| Dir.mkdir(d, 0o700); FileUtils.chown(PG_USER, PG_USER, d) }
      timed(:postgres_init) do
        run!(*as_postgres, "#{PG_BIN}/initdb", "-D", @pg_data, "-U", "postgres", "-A", "trust", "--no-sync",
             "-E", "UTF8", "--locale=C.UTF-8", log: "postgres-initdb.log")
      end
    end

    def start_postgres
      port = free_port
      spawn_server(:postgres, port, [*as_postgres, "#{PG_BIN}/postgres", "-D", @pg_data, "-p", port.to_s,
                                     "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=#{@pg_socket_dir}",
                                     "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                                     "-c", "max_connections=120", "-c", "shared_buffers=16MB"],
                   log: "postgres.log") { system("#{PG_BIN}/pg_isready", "-q", "-h", "127.0.0.1", "-p", port.to_s) }
      @env["FARCE_CLIENTS_PG"] = "host=127.0.0.1 port=#{port} user=postgres dbname=postgres"
    end

    def init_mariadb
      @mariadb_data = File.join(@dir, "mariadb")
      timed(:mariadb_init) do
        run!("/usr/bin/mariadb-install-db", "--no-defaults", "--datadir=#{@mariadb_data}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
             log: "mariadb-install-db.log")
      end
    end

    def start_mariadb
      port = free_port
      spawn_server(:mariadb, port, [*with_pdeathsig, "/usr/sbin/mariadbd", "--no-defaults", "--datadir=#{@mariadb_data}",
                                    "--user=root", "--bind-address=127.0.0.1", "--port=#{port}",
                                    "--socket=#{File.join(@dir, 'mariadb.sock')}",
                                    "--pid-file=#{File.join(@dir, 'mariadb.pid')}", "--skip-name-resolve",
                                    "--skip-log-bin", "--innodb-buffer-pool-size=32M", "--max-connections=200",
                                    "--log-error=#{File.join(@dir, 'mariadb.err')}"],
                   log: "mariadb.log") { mariadb_answers?(port) }
      @env["FARCE_CLIENTS_MYSQL_PORT"] = port.to_s
    end

    def start_redis
      port = free_port
      spawn_server(:redis, port, [*with_pdeathsig, "/usr/bin/redis-server", "--port", port.to_s, "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", @dir, "--daemonize", "no",
                                  "--logfile", File.join(@dir, "redis.log")],
                   log: "redis-stdout.log") { redis_answers?(port) }
      @env["FARCE_CLIENTS_REDIS_PORT"] = port.to_s
    end

    def with_pdeathsig
      ["setpriv", "--pdeathsig", "KILL", "--"]
    end

    def as_postgres
      ["setpriv", "--pdeathsig", "KILL", "--reuid=#{PG_USER}", "--regid=#{PG_USER}", "--init-groups", "--"]
    end

    def run!(*cmd, log:)
      path = File.join(@dir, log)
      pid = Process.spawn(*cmd, out: path, err: %i[child out], chdir: @dir, in: File::NULL)
      @init_pids[log] = pid
      _, status = Process.waitpid2(pid)
      @init_pids.delete(log)
      return if status.success?

      raise "clients: #{cmd.first(3).join(' ')} failed; its output:\n#{File.read(path)[-3000..] || File.read(path)}"
    end

    # ready: a block that says whether the server answers yet.
    def spawn_server(name, port, cmd, log:, &ready)
      # a process group of its own: a Ctrl-C at the terminal reaches the
      # tests, and the servers stop in #stop, in order, after them
      @pids[name] = Process.spawn(*cmd, out: File.join(@dir, log), err: %i[child out], chdir: @dir, in: File::NULL,
                                        pgroup: true)
      @ready[name] = [port, ready]
    end

    def wait_ready(name)
      port, ready = @ready.fetch(name)
      deadline = monotonic + READY_TIMEOUT
      until ready.call
        if Process.waitpid(@pids[name], Process::WNOHANG)
          @pids.delete(name)
          raise "clients: #{name} exited while starting (port #{port}); its logs:\n#{server_logs(name)}"
        end
        raise "clients: #{name} not ready on port #{port} after #{READY_TIMEOUT} s:\n#{server_logs(name)}" if monotonic > deadline

        sleep 0.05
      end
    end

    def server_logs(name)
      Dir[File.join(@dir, "#{name}*")].select { |f| File.file?(f) }.map { |f| "#{f}:\n#{File.read(f)[-2000..] || File.read(f)}" }.join("\n")
    end

    # MariaDB's greeting comes first on a new connection: ready once it does.
    def mariadb_answers?(port)
      socket = Socket.tcp("127.0.0.1", port, connect_timeout: 1)
      socket.wait_readable(1) && !socket.read_nonblock(4, exception: false).nil?
    rescue SystemCallError
      false
    ensure
      socket&.close
    end

    def redis_answers?(port)
      socket = Socket.tcp("127.0.0.1", port, connect_timeout: 1)
      socket.write("PING\r\n")
      socket.wait_readable(1) && socket.read_nonblock(64, exception: false).to_s.start_with?("+PONG")
    rescue SystemCallError
      false
    ensure
      socket&.close
    end

    def timed(what)
      t = monotonic
      yield
      @timings[what] = (monotonic - t).round(2)
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
