# frozen_string_literal: true

require "io/wait"
require "rbconfig"
require "socket"
require "timeout"

Dir[File.join(__dir__, "support", "**", "*.rb")].sort.each { |file| require file }

RSpec.configure do |config|
  config.disable_monkey_patching!
  config.expect_with(:rspec) { |expectations| expectations.syntax = :expect }
  # Ordering bugs between examples are exactly what the per-example thread is
  # meant to rule out, so shuffle to keep that honest. `--seed N` replays.
  config.order = :random
  Kernel.srand(config.seed)
  config.include FiberSchedulerContract::Helpers
end
