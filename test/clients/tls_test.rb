# frozen_string_literal: true

require_relative "case_helper"
require "openssl"
require "socket"
require "net/http"
require "tempfile"

# TLS through Ruby's openssl: SSLSocket's blocking calls wait through Ruby's
# IO when OpenSSL wants to read or write, so handshakes and records park
# the fiber. The certificate is made here at run time (nothing is checked
# in): one self-signed EC certificate for localhost and 127.0.0.1, which
# the clients verify.
class ClientsTlsTest < Minitest::Test
  include ClientsSuite::Case

  def self.certificate
    @certificate ||= begin
      key = OpenSSL::PKey::EC.generate("prime256v1")
      cert = OpenSSL::X509::Certificate.new
      cert.version = 2
      cert.serial = OpenSSL::BN.rand(64)
      cert.subject = cert.issuer = OpenSSL::X509::Name.parse("/CN=localhost")
      cert.public_key = key
      cert.not_before = Time.now - 60
      cert.not_after = Time.now + 3600
      ext = OpenSSL::X509::ExtensionFactory.new(cert, cert)
      cert.add_extension(ext.create_extension("subjectAltName", "DNS:localhost,IP:127.0.0.1"))
      cert.add_extension(ext.create_extension("basicConstraints", "CA:TRUE", true))
      cert.sign(key, OpenSSL::Digest.new("SHA256"))
      [key, cert]
    end
  end

  def server_context
    key, cert = self.class.certificate
    ctx = OpenSSL::SSL::SSLContext.new
    ctx.key = key
    ctx.cert = cert
    ctx
  end

  def client_context
    store = OpenSSL::X509::Store.new
    store.add_cert(self.class.certificate[1])
    ctx = OpenSSL::SSL::SSLContext.new
    ctx.set_params(verify_mode: OpenSSL::SSL::VERIFY_PEER, cert_store: store)
    ctx
  end

  # An OpenSSL::SSL::SSLServer accepting in a fiber, each connection handed
  # to a fiber of its own, which does the handshake (start_immediately off:
  # one slow peer holds only its own fiber), then calls the block with the
  # SSLSocket. Returns [port, stop]; stop ends the acceptor with one last
  # connection (closing a listener does not wake a fiber waiting in accept
  # under every scheduler: Async's does not).
  def tls_server(c, &handler)
    tcp = TCPServer.new("127.0.0.1", 0)
    port = tcp.addr[1]
    server = OpenSSL::SSL::SSLServer.new(tcp, server_context)
    server.start_immediately = false
    stopped = false
    acceptor = c.fiber do
      loop do
        ssl = server.accept
        if stopped
          ssl.close
          break
        end
        Fiber.schedule do
          ssl.accept
          handler.call(ssl)
        rescue OpenSSL::SSL::SSLError, SystemCallError, IOError, EOFError
          nil # a peer that went away; the case checks what it expects itself
        ensure
          ssl.close
        end
      end
      server.close
    end
    [port, -> { stopped = true; TCPSocket.new("127.0.0.1", port).close; acceptor.value }]
  end

  def tls_connect(port)
    ssl = OpenSSL::SSL::SSLSocket.new(TCPSocket.new("127.0.0.1", port), client_context)
    ssl.sync_close = true
    ssl.hostname = "localhost"
    ssl.connect
    ssl.post_connection_check("localhost")
    ssl
  end

  def test_fifty_clients_hundred_round_trips_each
    clients_case("tls", "SSLServer + 50 clients x 100 round trips") do |c|
      port, stop = tls_server(c) do |ssl|
        while (line = ssl.gets)
          ssl.write(line.reverse.sub(/\A\n/, "") + "\n") # the message reversed: the client checks every byte
        end
      end
      bytes = c.fibers(50) do |f|
        ssl = tls_connect(port)
        total = 0
        100.times do |i|
          message = "client #{f} round #{i} #{'x' * (i % 37)}"
          ssl.write("#{message}\n")
          answer = ssl.gets
          assert_equal "#{message.reverse}\n", answer, "client #{f} round #{i}"
          total += answer.bytesize
        end
        ssl.close
        total
      end
      assert_equal 50, bytes.size
      assert_equal bytes.sum, (0...50).sum { |f| (0...100).sum { |i| "client #{f} round #{i} #{'x' * (i % 37)}\n".bytesize } }
      stop.call
    end
  end

  def test_net_http_over_https_from_twenty_fibers
    clients_case("tls", "Net::HTTP over HTTPS from 20 fibers") do |c|
      port, stop = tls_server(c) do |ssl|
        while (request_line = ssl.gets)
          headers = {}
          while (line = ssl.gets) && line != "\r\n"
            name, value = line.split(":", 2)
            headers[name.downcase] = value.strip
          end
          body = "you asked for #{request_line.split[1]}"
          ssl.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
          break if headers["connection"] == "close"
        end
      end
      cert_file = Tempfile.new(["farce-clients", ".pem"])
      cert_file.write(self.class.certificate[1].to_pem)
      cert_file.flush
      bodies = c.fibers(20) do |f|
        http = Net::HTTP.new("127.0.0.1", port)
        http.use_ssl = true
        http.verify_mode = OpenSSL::SSL::VERIFY_PEER
        http.ca_file = cert_file.path
        http.start do
          Array.new(3) { |i| http.get("/fiber/#{f}/request/#{i}").then { |r| [r.code, r.body] } }
        end
      end
      assert_equal Array.new(20) { |f| Array.new(3) { |i| ["200", "you asked for /fiber/#{f}/request/#{i}"] } }, bodies
      stop.call
      cert_file.close!
    end
  end

  # Both halves of an abandoned handshake: a client whose peer reads the
  # ClientHello and hangs up, and a server whose peer sends part of one and
  # goes silent (the server's Timeout must fire while a good client is
  # served on the same listener).
  def test_handshake_abandoned_halfway
    clients_case("tls", "a TLS handshake the peer abandons halfway") do |c|
      # the client side
      hangs_up = TCPServer.new("127.0.0.1", 0)
      peer = c.fiber do
        conn = hangs_up.accept
        hello = conn.readpartial(4096)
        conn.close
        hello
      end
      error = assert_raises(OpenSSL::SSL::SSLError, EOFError, Errno::ECONNRESET, Errno::EPIPE) { tls_connect(hangs_up.addr[1]) }
      hello = peer.value
      assert_equal "\x16".b, hello.b[0], "the client sent a TLS handshake record first"
      c.note("client side: #{error.class}")
      hangs_up.close

      # the server side
      tcp = TCPServer.new("127.0.0.1", 0)
      accepted = c.fiber do
        Array.new(2) do
          conn = tcp.accept
          Fiber.schedule do
            ssl = OpenSSL::SSL::SSLSocket.new(conn, server_context)
            ssl.sync_close = true
            Timeout.timeout(0.5) { ssl.accept }
            ssl.write("served\n")
            ssl.close
          rescue Timeout::Error
            conn.close
          end
          conn
        end
      end
      silent = TCPSocket.new("127.0.0.1", tcp.addr[1])
      silent.write("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".b) # a record header announcing 512 bytes, and 6 of them
      good = tls_connect(tcp.addr[1])
      assert_equal "served\n", good.gets
      accepted.value
      # the server's Timeout fired and it hung up: the silent peer reads the end
      assert silent.wait_readable(5), "the server did not hang up on the silent peer within 5 s"
      ending = begin
        silent.read_nonblock(64, exception: false)
      rescue Errno::ECONNRESET
        nil
      end
      assert_nil ending, "the silent peer got #{ending.inspect} instead of the end of the connection"
      good.close
      silent.close
      tcp.close
    end
  end
end
