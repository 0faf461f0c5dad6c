# frozen_string_literal: true

require_relative "test_helper"

# Ruby 4.0 warns "IO::Buffer is experimental" when it allocates the buffers
# it hands to io_read/io_write; farce uses that one-time warning up when it
# is required (lib/farce/io_buffer_warning.rb), so a program that reads and
# writes through farce is not told about an API it never called.
class TestIOBufferWarning < Minitest::Test
  def test_io_through_the_scheduler_prints_no_io_buffer_warning
    out, status = ruby_subprocess(<<~RUBY)
      Warning[:experimental] = true # as -W:experimental, and Ruby's default
      require "farce"
      Farce.run(backend: :#{backend}) do
        r, w = IO.pipe
        Fiber.schedule { w.write("o"); w.write("k"); w.close }
        print r.read
      end
      print " experimental=\#{Warning[:experimental]}"
    RUBY
    assert status.success?, out
    assert_equal "ok experimental=true", out, "the user's setting is kept and nothing else is printed"
  end
end
