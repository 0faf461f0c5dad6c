# frozen_string_literal: true

require_relative "test_helper"

class TestProcessAndDNS < Minitest::Test
  def test_process_wait_does_not_block_other_fibers
    ticks = 0
    status = nil
    farce do
      Fiber.schedule { 10.times { sleep 0.01; ticks += 1 } }
      pid = Process.spawn(RbConfig.ruby, "-e", "sleep 0.15; exit 7")
      _, status = Process.wait2(pid)
    end
    assert_equal 7, status.exitstatus
    assert_equal 10, ticks, "fibers must keep running while a child is awaited"
  end

  def test_many_children_at_once
    statuses = []
    farce do
      5.times do |i|
        Fiber.schedule do
          pid = Process.spawn("sh", "-c", "sleep 0.0#{i}; exit #{i}")
          statuses << Process.wait2(pid)[1].exitstatus
        end
      end
    end
    assert_equal [0, 1, 2, 3, 4], statuses.sort
  end

  def test_wait_for_any_child
    farce do
      pid = Process.spawn("true")
      assert_equal pid, Process.wait
    end
  end

  def test_wnohang_returns_at_once
    farce do
      pid = Process.spawn("sleep", "0.2")
      assert_nil Process.wait(pid, Process::WNOHANG)
      Process.wait(pid)
    end
  end

  def test_backticks_and_system
    farce do
      assert_equal "hi\n", `echo hi`
      assert system("true")
    end
  end

  def test_address_resolve_localhost
    farce do
      addresses = Addrinfo.getaddrinfo("localhost", 80, nil, :STREAM).map(&:ip_address)
      assert_includes addresses, "127.0.0.1"
      sock = TCPServer.new("localhost", 0)
      client = TCPSocket.new("localhost", sock.addr[1])
      assert client
      client.close
      sock.close
    end
  end

  def test_address_resolve_hook_directly
    scheduler = Farce::Scheduler.new(backend: backend)
    assert_includes scheduler.address_resolve("localhost"), "127.0.0.1"
    assert_equal [], scheduler.address_resolve("no-such-host.invalid")
  ensure
    scheduler&.close
  end

  def test_unknown_host_raises_socket_error
    farce do
      assert_raises(SocketError) { TCPSocket.new("no-such-host.invalid", 80) }
    end
  end
end
