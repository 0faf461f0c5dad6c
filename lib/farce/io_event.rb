# frozen_string_literal: true

# farce as an io-event selector, for Async and Falcon:
#
#   IO_EVENT_SELECTOR=Farce RUBYOPT=-rfarce/io_event falcon serve
#
# io-event resolves IO_EVENT_SELECTOR with IO::Event::Selector.const_get each
# time a selector is created, so defining the constant here is enough. The Go
# core is not started by this file, nor by creating a selector: it starts at
# the first wait a selector has to make. So a Falcon-style master that runs a
# short reactor to bind its port (`Sync { endpoint.bound }`) and then forks
# leaves the Go runtime to the workers, where it must start.
require "io/event"
require_relative "../farce"

module IO::Event::Selector
  # The class is written in C (ext/farce/front_ends/io_event_selector.c, Farce::IOEventSelector);
  # it is published under io-event's namespace only when this file is required.
  const_set(:Farce, ::Farce::IOEventSelector) unless const_defined?(:Farce, false)
end
