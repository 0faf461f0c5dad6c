# What the Ractor child scripts of test/test_ractors.rb (ractor_*.rb) share.
# Each is run with `ruby -e`, with SCRIPTS_DIR set before its code, and
# requires this first.
require "farce"
Warning[:experimental] = false # "Ractor is experimental..."

# The Ractor's value: Ractor#value from Ruby 3.5 on, Ractor#take before.
def value_of(ractor)
  ractor.respond_to?(:value) ? ractor.value : ractor.take
end
