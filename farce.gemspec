# frozen_string_literal: true

require_relative "lib/farce/version"

# The source gem (platform "ruby"): C extension and Go core compiled at
# install time; needs Go (the version go.mod names) and a C compiler, and
# nothing from the network: `rake gem:source` puts the Go modules in vendor/.
# `rake gem:native` derives the precompiled x86_64-linux gem from this spec
# (rakelib/gem.rake), `rake gem:native PLATFORM=aarch64-linux` the arm64 one
# (rakelib/gem_aarch64.rake).
Gem::Specification.new do |spec|
  spec.name = "farce"
  spec.version = Farce::VERSION
  spec.summary = "A Fiber::Scheduler whose event loop is Go: io_uring, epoll or poll, safe across fork"
  spec.description = <<~TEXT
    farce is a Ruby Fiber::Scheduler: socket and pipe I/O, sleep, Queue, Mutex,
    ConditionVariable, Process.wait, DNS and Timeout park the fiber while the
    event loop runs the others. Its core (waits, timers, ready queue, fairness)
    and kernel drivers (io_uring, epoll, poll on Linux; kqueue and IOCP in the Go
    core) are Go, loaded lazily so that preforking servers stay safe. It also
    offers an io-event selector, so Async programs run on it unchanged. This
    source gem needs Go and a C compiler to install; the x86_64-linux and
    aarch64-linux gems need neither.
  TEXT
  spec.authors = ["farce developers"]
  spec.license = "MIT"
  spec.required_ruby_version = ">= 3.1"
  spec.metadata["rubygems_mfa_required"] = "true"

  spec.files = Dir[
    "README.md", "LICENSE", "farce.gemspec", "go.mod", "go.sum",
    "lib/farce.rb", "lib/farce/**/*.rb", "sig/**/*.rbs",
    "ext/farce/extconf.rb", "ext/farce/*/*.{c,h}", "ext/farce/core/*.go",
    "internal/**/*.go",
    "vendor/**/*" # present while `rake gem:source` builds the gem
  ].reject { |f| f.end_with?("_test.go") || File.directory?(f) }
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/farce/extconf.rb"]
end
