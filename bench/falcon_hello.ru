# frozen_string_literal: true

# The application of bench/falcon_serve.rb: real Falcon answering a fixed
# body, so that what the rows compare is the server and its selector.
BODY = ["Hello, world!"].freeze
HEADERS = { "content-type" => "text/plain", "content-length" => BODY.first.bytesize.to_s }.freeze

# /selector names the io-event selector under the worker's Async scheduler,
# so that the driver can check each run is on the selector it asked for.
run lambda { |env|
  if env["PATH_INFO"] == "/selector"
    selector = Fiber.scheduler&.instance_variable_get(:@selector)
    [200, { "content-type" => "text/plain" }, [selector.class.name.to_s]]
  else
    [200, HEADERS.dup, BODY]
  end
}
