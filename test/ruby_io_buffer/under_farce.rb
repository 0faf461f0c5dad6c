# frozen_string_literal: true

# Copied next to Ruby's own test/ruby/test_io_buffer.rb as
# test_io_buffer_under_farce.rb (rakelib/ruby_io_buffer.rake). Every case of
# that file whose name says it moves bytes through an IO or counts locks
# runs again inside Farce.run: a non-blocking fiber under farce's scheduler,
# so IO::Buffer#read/#write/#pread/#pwrite go through farce's hooks, which
# take and give back holds of their own on the buffers Ruby hands them (on
# Ruby 4.1 Ruby counts them, and ends the process when a hook gives back one
# it did not take). The other cases (bounds, slices, types, copies) never
# reach a scheduler: running them twice would test nothing more.
require_relative "test_io_buffer"
# the tree is tmp/ruby_fiber/X.Y/io_buffer/ inside the checkout
$LOAD_PATH.unshift(File.expand_path("../../../../lib", __dir__))
require "farce"

class TestIOBufferUnderFarce < TestIOBuffer
  CASES = /lock|read|write|transfer|invalidat|free/

  TestIOBuffer.public_instance_methods(false).grep(/\Atest_/).each do |name|
    if name.match?(CASES)
      define_method(name) { Farce.run { super() } }
    else
      undef_method(name)
    end
  end
end
