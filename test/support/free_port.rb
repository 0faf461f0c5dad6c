# frozen_string_literal: true

require "socket"

# A loopback TCP port that was free a moment ago, for a server that another
# process starts and binds itself (Falcon, PostgreSQL, MariaDB, Redis, an
# async-http app). Another process could take the port before the server binds;
# the server then fails to start and says so.
module FreePort
  module_function

  def free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end
end
