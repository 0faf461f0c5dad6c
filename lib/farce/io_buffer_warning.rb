# frozen_string_literal: true

module Farce
  # Ruby 4.0 prints "IO::Buffer is experimental and both the Ruby and C
  # interface may change in the future!" (category :experimental, once per
  # process) when any IO::Buffer is allocated, and that includes the buffers
  # Ruby itself hands to a scheduler's io_read/io_write hooks
  # (rb_io_buffer_new allocates through rb_io_buffer_type_allocate, which
  # warns). So the first read or write of every program on a scheduler that
  # defines those hooks, farce's or io-event's, told the user about an API
  # they never called. Ruby 3.3 and 3.4 warn only when a program uses the
  # experimental parts itself (ruby/ruby#9131: "the core interface as used by
  # the fiber scheduler should not emit this warning"), and ruby/ruby#18486
  # removes the warning for 4.1.
  #
  # The warning is said at most once per process, and Ruby counts it as said
  # even when the category is off: allocating one buffer here with
  # Warning[:experimental] off uses it up, and the user's setting is restored
  # at once. The price: a program that later calls IO::Buffer.new itself is
  # not warned either.
  def self.quiet_io_buffer_warning
    return if RUBY_VERSION < "4.0" || !defined?(IO::Buffer)

    was = Warning[:experimental]
    begin
      Warning[:experimental] = false
      IO::Buffer.new(1).free
    ensure
      Warning[:experimental] = was
    end
  end
  quiet_io_buffer_warning
end
