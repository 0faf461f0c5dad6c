# frozen_string_literal: true

# `falcon serve --preload` loads this in the master before it forks its
# workers: it runs an event loop there (a timer wait and a descriptor wait on
# the configured selector), so every worker inherits a process in which the
# selector already ran, as an application that warms a pool at boot does.
require "async"

Sync do
  sleep 0.01
  reader, writer = IO.pipe
  Async { writer.write("x") }
  reader.wait_readable
  reader.close
  writer.close
end
