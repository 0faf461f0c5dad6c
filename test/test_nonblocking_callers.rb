# frozen_string_literal: true

require_relative "test_helper"

# Ruby passes a length of 0 to io_read/io_write for read_nonblock and for a
# blocking read alike; the hook tells them apart by the method that called it
# (caller_may_wait.c: the caller's frame when it is a C method, a deeper
# search when Ruby code sits between; docs/behaviour.md, "Which callers may
# wait"). Ruby code between is a subclass's io_read calling super here
# (Async's scheduler in the peer suites): read_nonblock must still answer at
# once, and a blocking read must still wait for data. Each kind of caller the
# answer must recognise has a case below, and so does a user's method whose
# name ends in _nonblock.
class TestNonblockingCallers < Minitest::Test
  include FarceTestHelper

  def test_read_nonblock_through_a_ruby_io_read_answers_at_once
    skip_on_ruby_loop("routes io_read in Ruby: no frame search")
    out, status = ruby_subprocess(<<~RUBY, timeout: 20) # a parked fiber: the child hangs
      require "farce"
      $stdout.sync = true
      class Wrapped < Farce::Scheduler
        def io_read(*args)
          super
        end

        def io_write(*args)
          super
        end
      end
      Fiber.set_scheduler(Wrapped.new(backend: :#{backend}))
      r, w = IO.pipe
      Fiber.schedule do
        puts "nonblock: \#{r.read_nonblock(10, exception: false).inspect}"
        w.write_nonblock("x" * 65_536, exception: false) until w.write_nonblock("x", exception: false) == :wait_writable
        puts "write full: \#{w.write_nonblock("y", exception: false).inspect}"
      end
      Fiber.schedule do
        a, b = IO.pipe
        Fiber.schedule { sleep 0.05; b.write("late") }
        puts "blocking: \#{a.read(4).inspect}"
      end
      Fiber.scheduler.run
      puts "done"
      exit!(0)
    RUBY
    assert status.success?, out
    assert_includes out, "nonblock: :wait_readable"
    assert_includes out, "write full: :wait_writable"
    assert_includes out, 'blocking: "late"'
    assert_includes out, "done"
  end

  # The search itself, asked from Ruby methods (Farce.__caller_is_nonblock?
  # answers as the hooks would if it were one): a caller that is Ruby code
  # makes it search the frames above, up to 8, for a name that ends in
  # _nonblock.
  def plain_caller = Farce.__caller_is_nonblock?
  def user_poll_nonblock = Farce.__caller_is_nonblock?
  def outer_nonblock = plain_caller
  def nested(depth) = depth.zero? ? plain_caller : nested(depth - 1)
  def deep_nonblock = nested(10)

  def test_the_frame_search_from_ruby_callers
    skip "no native extension" unless Farce.respond_to?(:__caller_is_nonblock?)
    refute plain_caller, "a Ruby method with no *_nonblock name above it"
    assert user_poll_nonblock, "a user's method named *_nonblock"
    assert outer_nonblock, "a *_nonblock method two frames up"
    refute deep_nonblock, "a *_nonblock method beyond the frames searched"
  end

  # Through the hooks: whether a read or write of length 0 waited in the hook
  # (Ruby never called io_wait) or answered -EAGAIN (Ruby then called io_wait
  # and the hook again), for each kind of caller. `between: true` puts Ruby
  # code between the IO method and the hook (io_read/io_write overridden in
  # Ruby, calling super), as Async's scheduler does.
  CALLERS_SCRIPT = <<~'RUBY'
    require "farce"
    $stdout.sync = true
    between = ARGV[1] == "between"
    klass = Class.new(Farce::Scheduler) do
      attr_accessor :waits, :lengths
      define_method(:io_wait) { |*args| self.waits += 1; super(*args) }
      if between
        define_method(:io_read) { |*args| lengths << args[2]; super(*args) }
        define_method(:io_write) { |*args| lengths << args[2]; super(*args) }
      end
    end
    s = klass.new(backend: ARGV[0].to_sym)
    s.waits = 0
    s.lengths = []
    Fiber.set_scheduler(s)
    def poll_nonblock(io) = io.read(4)
    def late_writer(w, text = "late") = Fiber.schedule { sleep 0.02; w.write(text) }
    cases = {
      "read_nonblock" => ->(r, _w) { r.read_nonblock(4, exception: false) },
      "write_nonblock" => lambda do |_r, w|
        w.write_nonblock("x" * 65_536, exception: false) until w.write_nonblock("x", exception: false) == :wait_writable
        w.write_nonblock("y", exception: false)
      end,
      "read" => ->(r, w) { late_writer(w); r.read(4) },
      "readpartial" => ->(r, w) { late_writer(w); r.readpartial(4) },
      "gets" => ->(r, w) { late_writer(w, "line\n"); r.gets },
      "poll_nonblock" => ->(r, w) { late_writer(w); poll_nonblock(r) }
    }
    results = []
    Fiber.schedule do # one case after the other: the counts are each case's own
      cases.each do |name, run|
        r, w = IO.pipe
        s.waits = 0
        s.lengths.clear
        value = run.call(r, w)
        results << "#{name}: #{value.inspect} waits=#{s.waits} zero=#{s.lengths.include?(0)}"
      end
    end
    s.run
    puts results, "done"
  RUBY

  def caller_answers(between)
    skip_on_ruby_loop("routes io_read in Ruby: no frame search")
    skip "Ruby 4.1's single-transfer hooks never wait: the question is gone" if Farce::SINGLE_TRANSFER_HOOKS
    out, status = ruby_subprocess("ARGV.replace(%w[#{backend} #{between ? 'between' : 'direct'}])\n" + CALLERS_SCRIPT,
                                  timeout: 30)
    assert status.success?, out
    assert_includes out, "done"
    out.lines.filter_map { |l| l.match(/\A(\w+): (.*) waits=(\d+) zero=(\w+)$/)&.captures }
       .to_h { |name, value, waits, zero| [name, [value, Integer(waits), zero == "true"]] }
  end

  def test_each_kind_of_caller_with_the_io_method_right_below_the_hook
    got = caller_answers(false)
    assert_equal [":wait_readable", 0], got["read_nonblock"].first(2), "IO#read_nonblock answers at once"
    assert_equal [":wait_writable", 0], got["write_nonblock"].first(2), "IO#write_nonblock answers at once"
    # a C method (IO#read, IO#readpartial, IO#gets) right below the hook:
    # the hook waits for the data itself, Ruby's io_wait never runs
    assert_equal ['"late"', 0], got["read"].first(2)
    assert_equal ['"late"', 0], got["readpartial"].first(2)
    assert_equal ['"line\\n"', 0], got["gets"].first(2)
    # a user's method named *_nonblock that calls IO#read: IO#read is what
    # called the hook, so the read waits as any other
    assert_equal ['"late"', 0], got["poll_nonblock"].first(2)
  end

  def test_each_kind_of_caller_with_ruby_code_between
    got = caller_answers(true)
    assert_equal [":wait_readable", 0], got["read_nonblock"].first(2)
    assert_equal [":wait_writable", 0], got["write_nonblock"].first(2)
    assert_equal ['"late"', 0], got["read"].first(2), "no *_nonblock frame above: the hook waits"
    assert_equal ['"late"', 0], got["readpartial"].first(2)
    # A user's method named *_nonblock among the frames searched: taken for
    # a nonblocking caller when Ruby passed a length of 0, so the hook
    # answers -EAGAIN and Ruby waits (io_wait) and calls it again. The data
    # is the same; only the way to it is longer.
    value, waits, zero = got["poll_nonblock"]
    assert_equal '"late"', value
    if zero
      assert_operator waits, :>=, 1, "a length of 0 from under poll_nonblock: -EAGAIN, then Ruby's io_wait"
    else
      assert_equal 0, waits, "a length above 0 may always wait: no frame is read"
    end
  end
end
