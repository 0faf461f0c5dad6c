# frozen_string_literal: true

require_relative "apps_helper"
require "net/http"
require "net/http/persistent"
require "excon"
require "faraday"
require "httpx"
require "curb"

# The HTTP client libraries applications use, each from many fibers against
# the local server (http_server.rb: WEBrick in a process of its own). Each
# client is made the way its library's documentation has it for reuse: a
# keep-alive Net::HTTP per fiber, one Net::HTTP::Persistent and one Faraday
# connection shared by every fiber, a persistent Excon connection, an HTTPX
# session and a Curl::Easy per fiber.
class AppsHttpClientsTest < Minitest::Test
  include ClientsSuite::Case

  FIBERS = 10
  ROUNDS = 5

  # Each library as a tiny adapter: new(base, shared), get(path) -> body,
  # post(path, body) -> body, close. `shared` is what every fiber shares
  # (made once per case by .shared(base)), or nil.
  class NetHttp
    def self.shared(_base) = nil

    def initialize(base, _shared)
      uri = URI(base)
      @http = Net::HTTP.start(uri.host, uri.port)
    end

    def get(path) = @http.get(path).body
    def post(path, body) = @http.post(path, body).body
    def close = @http.finish
  end

  class Persistent
    def self.shared(_base) = Net::HTTP::Persistent.new(name: "farce-apps")

    def initialize(base, shared)
      @base = base
      @http = shared
    end

    def get(path) = @http.request(URI("#{@base}#{path}")).body

    def post(path, body)
      uri = URI("#{@base}#{path}")
      request = Net::HTTP::Post.new(uri)
      request.body = body
      @http.request(uri, request).body
    end

    def close = nil
  end

  class ExconClient
    def self.shared(_base) = nil

    def initialize(base, _shared)
      @conn = Excon.new(base, persistent: true)
    end

    def get(path) = @conn.get(path: path).body
    def post(path, body) = @conn.post(path: path, body: body).body
    def close = @conn.reset
  end

  class FaradayClient
    def self.shared(base) = Faraday.new(url: base)

    def initialize(_base, shared)
      @conn = shared
    end

    def get(path) = @conn.get(path).body
    def post(path, body) = @conn.post(path, body).body
    def close = nil
  end

  class HttpxClient
    def self.shared(_base) = nil

    def initialize(base, _shared)
      @base = base
      @session = HTTPX.plugin(:persistent)
    end

    def get(path) = checked(@session.get("#{@base}#{path}"))
    def post(path, body) = checked(@session.post("#{@base}#{path}", body: body))
    def close = @session.close

    def checked(response)
      response.raise_for_status
      response.to_s
    end
  end

  class CurbClient
    def self.shared(_base) = nil

    def initialize(base, _shared)
      @base = base
      @easy = Curl::Easy.new
    end

    def get(path)
      @easy.url = "#{@base}#{path}"
      @easy.http_get
      @easy.body_str
    end

    def post(path, body)
      @easy.url = "#{@base}#{path}"
      @easy.http_post(body)
      @easy.body_str
    end

    def close = @easy.close
  end

  {
    "net_http" => ["Net::HTTP", NetHttp],
    "net_http_persistent" => ["net-http-persistent", Persistent],
    "excon" => ["excon", ExconClient],
    "faraday" => ["faraday", FaradayClient],
    "httpx" => ["httpx", HttpxClient],
    "curb" => ["curb", CurbClient],
  }.each do |slug, (name, adapter)|
    define_method(:"test_#{slug}_from_fibers") do
      base = AppsSuite.http_base
      clients_case("http", "#{name}: #{FIBERS} fibers x #{ROUNDS + 1} requests, 10 in flight at once") do |c|
        client_case(c, adapter, base)
      end
    end
  end

  # FIBERS fibers, each with its client: ROUNDS GETs and a POST, every body
  # checked; then 10 fibers send one request each that the server holds until
  # all 10 are in (the library let them overlap, or they never gather).
  def client_case(c, adapter, base)
    shared = adapter.shared(base)
    bodies = c.fibers(FIBERS) do |f|
      client = adapter.new(base, shared)
      begin
        Array.new(ROUNDS) { |i| client.get("/hello?n=#{f}-#{i}") } << client.post("/echo", "posted by #{f}")
      ensure
        client.close
      end
    end
    assert_equal Array.new(FIBERS) { |f| Array.new(ROUNDS) { |i| "hello #{f}-#{i}" } << "posted by #{f}" }, bodies
    path = AppsSuite.gather_path(10)
    gathered = c.fibers(10) do
      client = adapter.new(base, shared)
      begin
        client.get(path)
      ensure
        client.close
      end
    end
    assert_equal Array.new(10) { "gathered 10" }, gathered
    shared.shutdown if shared.respond_to?(:shutdown)
  end
end
