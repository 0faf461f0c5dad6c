# frozen_string_literal: true

# io-event's selector contract, checked point by point against
# IO::Event::Selector::Farce and io-event's own EPoll selector, which must
# give the same results (Async relies on them):
#
# - io_wait always suspends the caller, even on a descriptor that is ready
#   already; `select` resumes it.
# - `select` reaps what the kernel has ready, and a zero-timeout select sees
#   readiness whose wait was armed in the same call; it returns the number
#   of fibers it resumed.
# - io_wait returns false when the fiber is transferred to without an event.
#
# Needs io-event (Debian sid's Ruby 3.3 in the chroot); skips elsewhere.
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "minitest/autorun"

require_relative "libraries"

IO_EVENT_MISSING = IOEventTestLibraries.missing("io-event", "io/event", "farce/io_event")

module SelectorContract
  def setup
    skip IO_EVENT_MISSING if IO_EVENT_MISSING
    @loop = Fiber.current
    @selector = self.class.selector_class.new(@loop)
    @pipes = []
  end

  def teardown
    @selector&.close
    Array(@pipes).flatten.each { |io| io.close unless io.closed? }
  end

  def pipe
    IO.pipe.tap { |pair| @pipes << pair }
  end

  # A fiber running block; it transfers back to the loop when done.
  def task(&block)
    Fiber.new do
      block.call
      @loop.transfer
    end
  end

  def test_io_wait_on_a_ready_descriptor_suspends_until_select
    r, w = pipe
    w.write("x")
    log = []
    fiber = task do
      log << :waiting
      log << [:woke, @selector.io_wait(fiber, r, IO::READABLE)]
    end
    fiber.transfer
    assert_equal [:waiting], log, "io_wait must transfer to the loop, not return at once"
    assert_equal 1, @selector.select(0), "select resumes the one waiting fiber"
    assert_equal [:waiting, [:woke, IO::READABLE]], log
  end

  def test_zero_timeout_select_sees_readiness_armed_in_the_same_call
    r, w = pipe
    buffer = IO::Buffer.new(16)
    got = nil
    fiber = task { got = @selector.io_read(fiber, r, buffer, 1, 0) }
    fiber.transfer # parks: the pipe is empty
    assert_nil got
    w.write("a")
    assert_equal 1, @selector.select(0), "the reader must be resumed by this select"
    assert_equal 1, got
    assert_equal "a", buffer.get_string(0, 1)
  end

  def test_select_returns_the_number_of_fibers_resumed
    pairs = Array.new(3) { pipe }
    woke = []
    pairs.each_with_index do |(r, _w), i|
      fiber = task { woke << [i, @selector.io_wait(fiber, r, IO::READABLE)] }
      fiber.transfer
    end
    assert_equal 0, @selector.select(0), "nothing is ready yet"
    pairs[0][1].write("x")
    pairs[2][1].write("x")
    assert_equal 2, @selector.select(1)
    assert_equal [[0, IO::READABLE], [2, IO::READABLE]], woke.sort
  end

  def test_io_wait_returns_false_when_transferred_to_without_an_event
    r, _w = pipe
    result = :unset
    fiber = task { result = @selector.io_wait(fiber, r, IO::READABLE) }
    fiber.transfer
    fiber.transfer # as Async's timers do: no event, no value
    assert_equal false, result
    assert_equal 0, @selector.select(0), "the cancelled wait must not resume the fiber again"
  end
end

class TestSelectorContractFarce < Minitest::Test
  include SelectorContract
  def self.selector_class = IO::Event::Selector::Farce
end

# io-event's EPoll selector is its native extension: sid's is built for Ruby
# 3.3 only, so on 3.4 io-event loads its pure-Ruby selectors without it.
class TestSelectorContractEPoll < Minitest::Test
  include SelectorContract
  def self.selector_class = IO::Event::Selector::EPoll

  def setup
    unless IO_EVENT_MISSING || defined?(IO::Event::Selector::EPoll)
      skip "io-event on Ruby #{RUBY_VERSION} has no native EPoll selector to compare with"
    end
    super
  end
end
