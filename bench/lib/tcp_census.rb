# frozen_string_literal: true

module Bench
  # What the kernel knows of the connections to a server's port, from `ss`
  # (iproute2; the kernel filters the sockets, where reading /proc/net/tcp
  # took 0.1-0.7 s with 20,000 sockets): how many of the server's ends are in
  # the states asked, and how many data segments they have received, which
  # under wrk is the requests sent, one segment each (wrk writes a request in
  # one write and waits for its answer before the next). The count is the
  # check that a load generator asked for N connections really holds N open
  # (wrk does not say when some never connected or were dropped); both mark out
  # the steady part of a run (bench/lib/steady_window.rb). Connections still
  # waiting in the listen queue count: they are open, the server has not taken
  # them yet.
  module TcpCensus
    module_function

    Look = Struct.new(:connections, :segments_in)
    ESTABLISHED = %w[established].freeze
    # established, or closed by the peer and not yet by the server
    HELD = %w[established close-wait].freeze

    # One look at the server's ends at the local port (any local address) in
    # the states; nil without ss.
    def look(port, states: ESTABLISHED)
      out = IO.popen(["ss", "-Htin", *states.flat_map { |s| ["state", s] }, "sport", "=", ":#{port}"],
                     err: File::NULL, &:read)
      $?.success? ? parse(out) : nil
    rescue SystemCallError
      nil
    end

    # Waits until the server has closed every connection at the port whose
    # peer has gone (a warm-up's, so that the measured run holds none of their
    # closing) or `timeout` seconds have passed; returns how many are left.
    def drain(port, timeout)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      loop do
        left = look(port, states: HELD)&.connections.to_i
        return left if left.zero? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.1
      end
    end

    # ss -Hti prints a line per socket and, indented under it, its tcp_info.
    def parse(out)
      Look.new(out.each_line.count { |line| line.match?(/\A\S/) },
               out.scan(/\bdata_segs_in:(\d+)/).sum { |(n)| n.to_i })
    end
  end
end
