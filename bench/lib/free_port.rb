# frozen_string_literal: true

require "socket"

module Bench
  module_function

  # A loopback TCP port that was free a moment ago, for a server a bench
  # driver starts in another process (which binds it itself).
  def free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end
end
