# frozen_string_literal: true

require_relative "case_helper"
require "net/http"
require "socket"
require "resolv"
require "webrick"
require "logger"

# HTTP and DNS clients of Ruby's standard library: Net::HTTP against
# WEBrick (in a thread of its own, as applications run it) and against a
# server made of fibers; Resolv::DNS against a UDP DNS server made of
# fibers; Addrinfo.getaddrinfo, which the scheduler's address_resolve hook
# answers.
class ClientsHttpDnsTest < Minitest::Test
  include ClientsSuite::Case

  def test_net_http_against_webrick
    clients_case("http", "Net::HTTP from 20 fibers against WEBrick") do |c|
      server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0, Logger: WEBrick::Log.new(File::NULL),
                                       AccessLog: [], DoNotReverseLookup: true)
      server.mount_proc("/") { |req, res| res.body = "webrick says #{req.path} #{req.query['n']}" }
      port = server.listeners.first.addr[1]
      thread = Thread.new { server.start } # a thread of its own: no scheduler there
      bodies = c.fibers(20) do |f|
        Net::HTTP.start("127.0.0.1", port) do |http|
          Array.new(3) { |i| http.get("/item/#{f}?n=#{i}").then { |r| [r.code, r.body] } }
        end
      end
      assert_equal Array.new(20) { |f| Array.new(3) { |i| ["200", "webrick says /item/#{f} #{i}"] } }, bodies
      server.shutdown
      thread.join
    end
  end

  def test_net_http_against_a_server_in_fibers
    clients_case("http", "Net::HTTP from 20 fibers against a server in fibers") do |c|
      tcp = TCPServer.new("127.0.0.1", 0)
      served = 0
      stopped = false
      # ended by one last connection: closing the listener does not wake a
      # fiber waiting in accept under every scheduler (Async's does not)
      acceptor = c.fiber do
        loop do
          conn = tcp.accept
          if stopped
            conn.close
            break
          end
          Fiber.schedule do
            while (request_line = conn.gets)
              headers = {}
              while (line = conn.gets) && line != "\r\n"
                name, value = line.split(":", 2)
                headers[name.downcase] = value.strip
              end
              body = "fibers say #{request_line.split[1]}"
              served += 1
              conn.write("HTTP/1.1 200 OK\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
              break if headers["connection"] == "close"
            end
          rescue SystemCallError, IOError
            nil
          ensure
            conn.close
          end
        end
      end
      bodies = c.fibers(20) do |f|
        Net::HTTP.start("127.0.0.1", tcp.addr[1]) do |http|
          Array.new(5) { |i| http.get("/keep-alive/#{f}/#{i}").then { |r| [r.code, r.body] } }
        end
      end
      assert_equal Array.new(20) { |f| Array.new(5) { |i| ["200", "fibers say /keep-alive/#{f}/#{i}"] } }, bodies
      assert_equal 100, served
      stopped = true
      TCPSocket.new("127.0.0.1", tcp.addr[1]).close
      acceptor.value
      tcp.close
    end
  end

  # A UDP DNS server in a fiber that answers hostN.farce.test with
  # 10.0.N.1 (and NXDOMAIN otherwise); 50 client fibers ask it.
  def test_resolv_dns_against_a_udp_server_in_fibers
    clients_case("dns", "Resolv::DNS from 50 fibers against a UDP server in fibers") do |c|
      udp = UDPSocket.new
      udp.bind("127.0.0.1", 0)
      questions = 0
      server = c.fiber do
        loop do
          packet, (_, port, _, host) = udp.recvfrom(512)
          break if packet == "stop" # (closing the socket does not wake the fiber under every scheduler)

          query = Resolv::DNS::Message.decode(packet)
          reply = Resolv::DNS::Message.new(query.id)
          reply.qr = 1
          reply.aa = 1
          reply.rd = query.rd
          reply.ra = 0
          query.each_question do |name, type|
            questions += 1
            reply.add_question(name, type)
            if type == Resolv::DNS::Resource::IN::A && (n = name.to_s[/\Ahost(\d+)\.farce\.test\z/, 1])
              reply.add_answer(name, 60, Resolv::DNS::Resource::IN::A.new("10.0.#{n}.1"))
            end
          end
          reply.rcode = Resolv::DNS::RCode::NXDomain if reply.answer.empty?
          udp.send(reply.encode, 0, host, port)
        end
      end
      port = udp.addr[1]
      addresses = c.fibers(50) do |i|
        dns = Resolv::DNS.new(nameserver_port: [["127.0.0.1", port]], search: [], ndots: 1)
        dns.timeouts = 5
        address = dns.getresources("host#{i}.farce.test", Resolv::DNS::Resource::IN::A).map { |r| r.address.to_s }
        dns.close
        address
      end
      assert_equal Array.new(50) { |i| ["10.0.#{i}.1"] }, addresses
      assert_operator questions, :>=, 50
      UDPSocket.new.tap { |u| u.send("stop", 0, "127.0.0.1", port) }.close
      server.value
      udp.close
    end
  end

  def test_getaddrinfo_from_fifty_fibers
    clients_case("dns", "Addrinfo.getaddrinfo from 50 fibers") do |c|
      names = %w[localhost 127.0.0.1 ::1]
      answers = c.fibers(50) do |i|
        name = names[i % names.size]
        Addrinfo.getaddrinfo(name, 80 + i, nil, :STREAM).map { |ai| [ai.ip_address, ai.ip_port] }.uniq
      end
      answers.each_with_index do |found, i|
        case names[i % names.size]
        when "localhost" then assert_includes found, ["127.0.0.1", 80 + i]
        when "127.0.0.1" then assert_equal [["127.0.0.1", 80 + i]], found
        when "::1" then assert_equal [["::1", 80 + i]], found
        end
      end
    end
  end
end
