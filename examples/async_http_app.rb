# frozen_string_literal: true

# A Rack-style application served by async-http (Async::HTTP::Server), on
# farce's Go core through io-event:
#
#   IO_EVENT_SELECTOR=Farce ruby -Ilib examples/async_http_app.rb [port]
#   ruby -Ilib examples/async_http_app.rb [port]      # Async's default (EPoll)
#
# The app is the usual `call(env) -> [status, headers, body]`; the small
# adapter below turns an async-http request into a Rack-like env and the
# triple back into a response (protocol-rack does this fully; a hello app
# does not need it, and Debian's Ruby 3.3 does not ship it).
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "farce/io_event"
require "async"
require "async/http/server"
require "async/http/endpoint"
require "protocol/http/response"

module AsyncHttpApp
  BODY = "Hello from farce\n"

  # The Rack-style application.
  APP = lambda do |env|
    case env["PATH_INFO"]
    when "/echo" then [200, {"content-type" => "text/plain"}, [env["QUERY_STRING"].to_s]]
    else [200, {"content-type" => "text/plain"}, [BODY]]
    end
  end

  # async-http request -> env -> app -> async-http response.
  def self.adapter(app)
    lambda do |request|
      path, query = request.path.split("?", 2)
      env = {
        "REQUEST_METHOD" => request.method, "PATH_INFO" => path, "QUERY_STRING" => query || "",
        "SERVER_PROTOCOL" => request.version, "rack.input" => request.body
      }
      status, headers, body = app.call(env)
      Protocol::HTTP::Response[status, headers.to_a, body]
    end
  end

  # The server for `url`; run it inside a reactor with #run.
  def self.server(url, app: APP)
    endpoint = Async::HTTP::Endpoint.parse(url)
    Async::HTTP::Server.new(adapter(app), endpoint)
  end

  # The selector class the current reactor runs on (for logs and tests).
  def self.selector_name
    Fiber.scheduler&.instance_variable_get(:@selector)&.class&.name
  end
end

if $PROGRAM_NAME == __FILE__
  port = Integer(ARGV[0] || 9294)
  Async do
    warn "async_http_app: http://127.0.0.1:#{port}/ on #{AsyncHttpApp.selector_name} (pid #{Process.pid})"
    AsyncHttpApp.server("http://127.0.0.1:#{port}").run
  end
end
