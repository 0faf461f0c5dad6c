# frozen_string_literal: true

require_relative "test_helper"

# Error conditions on descriptors (EPOLLERR/POLLERR, a TCP reset, a pipe
# whose other end closed): a wait reports them once, the follow-up
# operation surfaces them, and waits afterwards block again unless the
# condition is permanent.
class TestErrorEvents < Minitest::Test
  # After an error condition (EPOLLERR/POLLERR) has been consumed,
  # waits must block again instead of reporting ready at once forever.
  # A connected UDP socket gets ICMP port-unreachable while a fiber waits.
  def test_udp_error_is_not_sticky
    each_backend do |b|
      result = nil
      farce_on(b) do
        port = UDPSocket.open { |u| u.bind("127.0.0.1", 0); u.addr[1] } # now closed
        sock = UDPSocket.new
        sock.connect("127.0.0.1", port)
        Fiber.schedule do
          sock.wait_readable(5)
          first = begin
            sock.recv_nonblock(10)
          rescue Errno::ECONNREFUSED
            :refused
          rescue IO::WaitReadable
            :again
          end
          t0 = monotonic
          again = sock.wait_readable(0.3)
          result = [first, again, monotonic - t0]
        end
        Fiber.schedule { sock.send("ping", 0) }
      end
      first, again, waited = result
      assert_equal :refused, first, "#{b}: expected the ICMP error to reach the waiter"
      assert_nil again, "#{b}: a wait after the consumed error reported ready at once (#{waited}s)"
      assert_operator waited, :>=, 0.25, b
    end
  end

  # The same socket keeps working: data sent after the error is
  # received by a wait that blocks for it, and other fibers run meanwhile.
  def test_udp_socket_works_after_the_error
    each_backend do |b|
      got = nil
      ticks = 0
      farce_on(b) do
        peer = UDPSocket.new
        peer.bind("127.0.0.1", 0)
        port = peer.addr[1]
        peer.close
        sock = UDPSocket.new
        sock.bind("127.0.0.1", 0)
        sock.connect("127.0.0.1", port)
        Fiber.schedule do
          sock.wait_readable(5)
          sock.recv_nonblock(10) rescue nil # the ICMP error
          # a port of its own: the closed one may be taken by then (tests
          # run in parallel in CI; one bind got EADDRINUSE there)
          peer = UDPSocket.new
          peer.bind("127.0.0.1", 0)
          sock.connect("127.0.0.1", peer.addr[1])
          peer.connect("127.0.0.1", sock.addr[1])
          Fiber.schedule { sleep 0.2; peer.send("late", 0) }
          got = sock.recv(10)
          peer.close
        end
        Fiber.schedule { sock.send("ping", 0) }
        Fiber.schedule { 10.times { sleep 0.01; ticks += 1 } }
      end
      assert_equal "late", got, b
      assert_equal 10, ticks, b
    end
  end

  # A TCP reset and a pipe whose other end closed are permanent
  # conditions: waits report them at once (no hang), and the follow-up
  # operation surfaces them.
  def test_tcp_reset_and_closed_pipes_finish_waits
    each_backend do |b|
      res = {}
      farce_on(b) do
        server = TCPServer.new("127.0.0.1", 0)
        client = TCPSocket.new("127.0.0.1", server.addr[1])
        peer = server.accept
        Fiber.schedule do
          client.wait_readable(5)
          res[:rst] = begin
            client.read_nonblock(10)
          rescue Errno::ECONNRESET
            :reset
          rescue EOFError
            :eof
          end
          res[:rst_again] = client.wait_readable(1) ? :ready : :timeout
        end
        Fiber.schedule do
          peer.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack("ii"))
          peer.close
        end
        r, w = IO.pipe
        Fiber.schedule { res[:pipe_eof] = r.read(1); res[:pipe_again] = r.wait_readable(1) ? :ready : :timeout }
        Fiber.schedule { w.close }
        r2, w2 = IO.pipe
        Fiber.schedule do
          r2.close
          res[:epipe] = begin
            w2.write("x" * 100_000)
          rescue Errno::EPIPE
            :epipe
          end
        end
      end
      assert_includes %i[reset eof], res[:rst], b
      assert_equal :ready, res[:rst_again], b
      assert_nil res[:pipe_eof], b
      assert_equal :ready, res[:pipe_again], b
      assert_equal :epipe, res[:epipe], b
    end
  end
end
