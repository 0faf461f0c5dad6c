# frozen_string_literal: true

# What the applications suite (test/apps/*_test.rb, run by `rake test:apps`)
# adds to the real-clients suite's harness (test/clients/case_helper.rb,
# whose ClientsSuite::Case runs each case in a child process on a fresh
# loop, with a ticker fiber measuring the loop's worst gap): the servers'
# addresses in the forms frameworks take them, the local HTTP server, and
# rendezvous that prove work overlapped without timing it.
#
# Like the clients suite's, the file names end in _test.rb, so `rake test`
# does not load them; loaded by hand without the servers, the cases that
# need one skip and say so.
require_relative "../clients/case_helper"
require "rbconfig"
require "uri"

module AppsSuite
  ROOT = File.expand_path("../..", __dir__)
  LIB = File.join(ROOT, "lib")
  # The MariaDB database the ORMs' cases use (the server starts with none
  # but the system's): made on first use, shared by the runs; each case's
  # tables carry its process id.
  MYSQL_DATABASE = "farce_apps"

  module_function

  # PostgreSQL's address as a Hash (host, port, user, dbname), from the
  # libpq string the clients suite's servers give.
  def pg
    ClientsSuite::PG.split.to_h { |pair| pair.split("=", 2) }
  end

  def pg_url(**query)
    params = query.empty? ? "" : "?#{URI.encode_www_form(query)}"
    "postgres://#{pg['user']}@#{pg['host']}:#{pg['port']}/#{pg['dbname']}#{params}"
  end

  # PostgreSQL as ActiveRecord's establish_connection and Sequel.connect take it.
  def activerecord_pg(**options)
    { adapter: "postgresql", host: pg["host"], port: Integer(pg["port"]), username: pg["user"], database: pg["dbname"],
      **options }
  end

  def sequel_pg(**options)
    { adapter: "postgres", host: pg["host"], port: Integer(pg["port"]), user: pg["user"], database: pg["dbname"], **options }
  end

  # Makes the MariaDB database of the suite if it is not there (one
  # statement, from the case's child; mysql2's connect blocks the loop for
  # the ~1 ms of a loopback connect).
  def ensure_mysql_database
    require "mysql2"
    client = Mysql2::Client.new(host: "127.0.0.1", port: ClientsSuite::MYSQL_PORT, username: "root", connect_timeout: 5)
    client.query("CREATE DATABASE IF NOT EXISTS #{MYSQL_DATABASE}")
    client.close
  end

  # A table name no other case or run uses (the case's child pid).
  def table(stem)
    "apps_#{stem}_#{Process.pid}"
  end

  # The base URL of the local HTTP server (http_server.rb): started on first
  # use, in the test process (before a case forks its child), and ended when
  # that process ends (its standard input reaches end of file).
  def http_base
    @http_base ||= begin
      @http_server = IO.popen([RbConfig.ruby, File.join(__dir__, "http_server.rb")], "r+")
      port = @http_server.gets or raise "the local HTTP server did not start"
      "http://127.0.0.1:#{Integer(port)}"
    end
  end

  # A path of the local server that answers only once `count` requests with
  # the same group have arrived (or says after 5 s how many came): a client
  # that does not let fibers overlap never gathers them. The group is unique
  # to the call.
  def gather_path(count)
    @gather_groups = (@gather_groups || 0) + 1
    "/gather?group=#{Process.pid}-#{@gather_groups}&n=#{count}"
  end

  # A shell command that ends only once `count` processes ran it with the same
  # directory: each adds its pid to a file there, the one that finds `count`
  # lines in it makes "go", and each waits up to `seconds` for "go" (exit 9 if
  # it never comes). Children that the loop started one at a time, each waited
  # for before the next, never meet.
  def rendezvous_sh(dir, count, seconds: 5)
    file = File.join(dir, "arrived")
    go = File.join(dir, "go")
    "echo $$ >> #{file}; [ \"$(wc -l < #{file})\" -ge #{count} ] && : > #{go}; i=0; " \
      "while [ ! -e #{go} ]; do i=$((i+1)); [ $i -gt #{(seconds / 0.05).ceil} ] && exit 9; sleep 0.05; done"
  end

  # A gate for the first `count` fibers that reach it: each waits (up to
  # `seconds`) until all of them are there, then they go on together; the
  # fibers that come later pass. Fibers that a pool or a loop ran one at a
  # time never meet at it, and the fibers that hold a pool's connections
  # meet at it only if all of them hold one at once.
  class Gate
    def initialize(count, seconds: 5)
      @count = count
      @seconds = seconds
      @arrived = 0
      @lock = Mutex.new
      @opened = ConditionVariable.new
    end

    # Whether all `count` met (true also for a fiber that came later).
    def pass
      @lock.synchronize do
        @arrived += 1
        @opened.broadcast if @arrived == @count
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + @seconds
        while @arrived < @count
          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          return false if left <= 0

          @opened.wait(@lock, left)
        end
        true
      end
    end
  end

  # The command that runs a Ruby script of this suite on the case's loop:
  # the environment that chose the loop (FARCE_CLIENTS_LOOP, FARCE_BACKEND,
  # IO_EVENT_SELECTOR) is inherited; farce's lib/ is on the load path.
  def ruby_command(script, *args)
    [RbConfig.ruby, "-I", LIB, File.join(__dir__, script), *args]
  end
end
