# frozen_string_literal: true

require_relative "lib/farce/version"

Gem::Specification.new do |spec|
  spec.name = "farce"
  spec.version = Farce::VERSION
  spec.summary = "A fast, dependable Fiber::Scheduler whose event loop is written in Go"
  spec.description = <<~TEXT
    farce is a Ruby Fiber::Scheduler: socket and pipe I/O, sleep, Queue, Mutex,
    ConditionVariable, Process.wait, DNS and Timeout park the fiber while the
    event loop runs the others. Its core (waits, timers, ready queue, fairness)
    and kernel drivers (epoll, poll; kqueue and IOCP in the Go core) are Go,
    loaded lazily so that preforking servers stay safe. Building it needs Go.
  TEXT
  spec.authors = ["farce developers"]
  spec.license = "MIT"
  spec.homepage = "https://example.invalid/farce"
  spec.required_ruby_version = ">= 3.1"
  spec.metadata["rubygems_mfa_required"] = "true"

  spec.files = Dir[
    "README.md", "LICENSE", "farce.gemspec", "go.mod", "go.sum",
    "lib/farce.rb", "lib/farce/*.rb", "sig/**/*.rbs",
    "ext/farce/*.{rb,c,h}", "ext/farce/core/*.{c,h,go}",
    "internal/**/*.go"
  ].reject { |f| f.end_with?("_test.go") }
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/farce/extconf.rb"]
end
