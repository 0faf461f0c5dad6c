# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"
require "tmpdir"

# Regular files through the scheduler's hooks (io_read/io_write for
# File#read/#write, io_pread/io_pwrite for IO#pread/#pwrite and IO::Buffer's):
# what the page cache holds is read at once (RWF_NOWAIT), what must come from
# the disk is a completion operation on io_uring and a worker-pool job
# elsewhere, never a read(2) that holds the loop (docs/behaviour.md, "Regular files"). Where a
# test needs the file to be read from the disk, it drops it from the page
# cache first (fdatasync, then IO#advise(:dontneed)).
class TestRegularFiles < Minitest::Test
  def setup
    skip "Ruby 4.1's single-transfer hooks (io_transfer_v4.c) still read files on the loop's thread" if Farce::SINGLE_TRANSFER_HOOKS
    @dir = Dir.mktmpdir("farce-files")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def write_file(name, data)
    path = File.join(@dir, name)
    File.binwrite(path, data)
    path
  end

  # Drops path's pages from the page cache (only clean pages go: fdatasync
  # first). Where util-linux's fincore is at hand, until it says none is
  # left (a page another CPU just added may be missed once). Outside the
  # scheduler: fincore is a child process.
  def drop_from_page_cache(path)
    5.times do
      File.open(path, "r+b") do |f|
        f.fdatasync
        f.advise(:dontneed)
      end
      left = cached_bytes(path)
      return if left.nil? || left.zero?
    end
  end

  # The bytes of path in the page cache (fincore), or nil when it cannot say.
  def cached_bytes(path)
    out = IO.popen(["fincore", "--noheadings", "--bytes", "--output", "RES", path], err: File::NULL, &:read)
    $?.success? ? Integer(out.strip, exception: false) : nil
  rescue SystemCallError
    nil
  end

  # Whether this file system lets pages go (tmpfs keeps them): a probe file,
  # dropped, has no byte cached by fincore's count, or (without fincore) is
  # not readable with RWF_NOWAIT. Outside the scheduler.
  def page_cache_droppable?
    path = write_file("probe", "p" * 65_536)
    drop_from_page_cache(path)
    left = cached_bytes(path)
    return left.zero? if left

    File.open(path, "rb") { |f| Farce.__file_nowait(false, f, IO::Buffer.new(4096), 0, 0, 4096) == -Errno::EAGAIN::Errno }
  end

  # How many file steps left the loop's thread (completion operations, or
  # worker-pool jobs) and how many the page cache answered at once.
  def file_steps(stats)
    ops = stats[:completion_ops] ? stats[:completion_ops_submitted] : 0
    { off_loop: ops + stats[:file_transfers_offloaded].to_i, cached: stats[:file_transfers_cached].to_i }
  end

  # A file read must leave the loop's thread when its bytes are not cached,
  # which needs a file system that drops them (droppable:
  # page_cache_droppable?, asked before the scheduler ran).
  def needs_disk_reads(droppable)
    skip "this file system keeps files in the page cache (tmpfs?): no read here would wait for a disk" unless droppable
  end

  def with_timeout(seconds = 60, &block)
    Timeout.timeout(seconds) { farce { block.call(Fiber.scheduler) } }
  end

  # ---- contents -------------------------------------------------------------

  def test_reads_return_the_contents_big_and_small_with_the_position_ruby_reports
    data = Random.new(1).bytes(3 << 20) + "end"
    path = write_file("big", data)
    stats = nil
    with_timeout do |s|
      assert_equal data, File.binread(path)
      File.open(path, "rb") do |f|
        assert_equal data.byteslice(0, 10), f.read(10)
        assert_equal 10, f.pos
        assert_equal data.byteslice(10, 100_000), f.read(100_000)
        assert_equal 100_010, f.pos
        assert_equal data.byteslice(100_010, 1), f.getc
        f.seek(-3, IO::SEEK_END)
        assert_equal "end", f.read
        assert_equal data.bytesize, f.pos
        assert_nil f.read(1), "end of file"
        assert_equal "", f.read
        f.seek(5)
        assert_equal data.byteslice(5, 7), f.sysread(7)
        assert_equal 12, f.pos
        f.rewind
        assert_equal data, f.read
      end
      assert_equal "", File.binread(write_file("empty", ""))
      stats = s.stats
    end
    steps = file_steps(stats)
    assert_operator steps[:off_loop] + steps[:cached], :>, 0, "no read went the file's way: #{steps}"
  end

  def test_writes_land_at_the_position_appends_at_the_end
    big = Random.new(2).bytes(2 << 20)
    path = File.join(@dir, "out")
    with_timeout do
      File.open(path, "wb") do |f|
        f.write(big)
        f.write("small")
        f.print("!")
        f.flush
        assert_equal big.bytesize + 6, f.pos
      end
      File.open(path, "ab") { |f| f.write("appended") }
      File.open(path, "r+b") do |f|
        f.seek(3)
        f.write("ZZ")
        f.flush
        assert_equal 5, f.pos
        assert_equal 4, f.syswrite("SYSW")
        assert_equal 9, f.pos
        assert_equal big.byteslice(9, 3), f.read(3)
      end
    end
    expected = big + "small!appended"
    expected[3, 2] = "ZZ"
    expected[5, 4] = "SYSW"
    assert_equal expected, File.binread(path)
  end

  def test_a_file_appended_to_meanwhile_reads_on_from_where_it_stopped
    path = write_file("log", "first")
    with_timeout do
      File.open(path, "rb") do |r|
        assert_equal "first", r.read
        assert_nil r.read(1)
        appender = Fiber.schedule { File.open(path, "ab") { |w| w.write("second") } }
        sleep 0.001 while appender.alive?
        assert_equal "second", r.read
        assert_equal 11, r.pos
        assert_nil r.read(1)
      end
    end
  end

  def test_pread_and_pwrite_at_offsets_leave_the_position_alone
    needs_ruby "3.3"
    data = Random.new(3).bytes(1 << 20)
    path = write_file("positional", data)
    with_timeout do |s|
      before = file_steps(s.stats).values.sum
      File.open(path, "r+b") do |f|
        assert_equal data.byteslice(1000, 10), f.pread(10, 1000)
        assert_equal 0, f.pos
        assert_raises(EOFError) { f.pread(1, data.bytesize) }
        buffer = IO::Buffer.new(4096)
        assert_equal 4096, buffer.pread(f, 500_000, 4096)
        assert_equal data.byteslice(500_000, 4096), buffer.get_string(0, 4096)
        assert_equal 100, buffer.pread(f, data.bytesize - 100, 4096) # short at the end of the file
        assert_equal 3, IO::Buffer.for("PWR").pwrite(f, 7, 3)
        assert_equal 2, f.pwrite("pw", 20)
        assert_equal 0, f.pos
        assert_equal data.byteslice(0, 7) + "PWR" + data.byteslice(10, 10) + "pw", f.read(22)
      end
      # IO::Buffer's come with the GVL on every Ruby: on io_uring the file's
      # way (operations, or the page cache at once), elsewhere the worker pool
      stats = s.stats
      if stats[:completion_ops]
        steps = file_steps(stats)
        assert_operator steps[:off_loop] + steps[:cached] - before, :>=, 3, "IO::Buffer#pread/#pwrite went the file's way"
      else
        assert_operator s.worker_pool.threads, :>=, 1, "IO::Buffer#pread/#pwrite ran on a worker thread"
      end
    end
  end

  # ---- the loop keeps running -------------------------------------------------

  def test_a_ticker_fiber_keeps_ticking_while_a_file_is_read
    data = Random.new(4).bytes(8 << 20)
    path = write_file("slow", data)
    ticks_while_reading = 0
    stats = nil
    droppable = page_cache_droppable?
    drop_from_page_cache(path)
    with_timeout do |s|
      needs_disk_reads(droppable)
      reading = false
      done = false
      Fiber.schedule do
        until done
          ticks_while_reading += 1 if reading
          sleep 0
        end
      end
      File.open(path, "rb") do |f|
        reading = true
        assert_equal data, f.read # the fiber parks in here: the ticker runs
        reading = false
      end
      done = true
      stats = s.stats
    end
    assert_operator ticks_while_reading, :>, 0, "the ticker never ran while the file was read: the read held the loop"
    steps = file_steps(stats)
    assert_operator steps[:off_loop], :>, 0, "the read neither was a completion operation nor went to a worker: #{steps}"
    return unless stats[:completion_ops]

    assert_operator stats[:completion_ops_submitted], :>, 0, "io_uring: the disk reads are completion operations"
    assert_equal 0, stats[:file_transfers_offloaded], "io_uring: no worker thread reads"
  end

  # ---- interrupts ---------------------------------------------------------------

  # Fiber#raise reaches a fiber parked in a file read of the io_read hook
  # (called with a buffer of our own, so that its lock can be checked): the
  # buffer is given back, no byte is lost or read twice, and the loop goes on.
  def test_an_exception_during_a_file_read_leaves_no_lock_and_loses_no_bytes
    skip "IO::Buffer needs Ruby 3.1" unless defined?(IO::Buffer)
    data = Random.new(5).bytes(4 << 20)
    path = write_file("interrupted", data)
    offset = RUBY_VERSION >= "3.2" ? [0] : []
    interrupted = Class.new(StandardError)
    droppable = page_cache_droppable?
    drop_from_page_cache(path)
    with_timeout do |s|
      needs_disk_reads(droppable)
      buffer = IO::Buffer.new(1 << 20)
      File.open(path, "rb") do |f|
        reader = Fiber.current
        reading = false
        Fiber.schedule do
          sleep 0 until reading
          reader.raise(interrupted) # resumes the reader with it, so nothing may follow here
        end
        begin
          reading = true
          s.io_read(f, buffer, 0, *offset)
          flunk "the read finished before the exception came"
        rescue interrupted
          reading = false
        end
        refute buffer.locked?, "the buffer is still locked after the interrupted read"
        buffer.resize(2 << 20) # raises IO::Buffer::LockedError while held
        sleep 0.001 # the loop still wakes timers
        assert_equal data, f.read, "bytes read by the interrupted step must be read again, once"
        assert_equal data.bytesize, f.pos
      end
    end
  end

  def test_a_timeout_during_file_reads_loses_no_bytes
    data = Random.new(6).bytes(4 << 20)
    paths = Array.new(5) { |i| write_file("timeout#{i}", data) }
    droppable = page_cache_droppable?
    paths.each { |path| drop_from_page_cache(path) }
    with_timeout do |s|
      needs_disk_reads(droppable)
      paths.each do |path|
        File.open(path, "rb") do |f|
          got = nil
          begin
            Timeout.timeout(0.0005) { got = f.read(1 << 20) }
          rescue Timeout::Error
            # interrupted at some point of the read: what was read comes again
          end
          assert_equal data, (got || "") + f.read
          assert_equal data.bytesize, f.pos
        end
      end
    end
  end
end
