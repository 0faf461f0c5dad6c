# frozen_string_literal: true

require_relative "apps_helper"
require "fcntl"
require "io/nonblock"
require "io/wait"
require "tmpdir"

# A Ruby program on the loop (stdio_app.rb, run by the case on the case's own
# loop) in shell pipelines, as command-line tools and 12-factor services
# run: its fibers writing to a pipe that `head` closes early; its standard
# output shared with the next command of a `{ app; cmd; }` group, which
# must find the pipe as the app found it; a fiber reading standard input
# from a producer that pauses while other fibers run.
class AppsStdioTest < Minitest::Test
  include ClientsSuite::Case

  ONE_MIB = 1 << 20

  # 10 fibers write 1,000 lines each (180 kB, more than a pipe holds); head
  # takes 5 and exits. The writes after that fail with EPIPE (Ruby ignores
  # SIGPIPE), each fiber stops at its first, the program ends normally: the
  # pipeline ends with head's 5 lines. (A fiber may have written all its
  # lines before head left: how many saw EPIPE depends on when head ran.)
  def test_app_piped_into_head
    clients_case("stdio", "app | head -n 5: 10 fibers write 1,000 lines each") do |c|
      command = "set -o pipefail; #{AppsSuite.ruby_command('stdio_app.rb', 'write', '10', '1000').join(' ')} | head -n 5"
      out, err, status = pipeline(["bash", "-c", command])
      lines = out.lines
      assert_equal 5, lines.size, "head's output: #{out.inspect}"
      lines.each { |line| assert_match(/\Afiber \d line \d+\n\z/, line) }
      assert status.success?, "the pipeline failed (#{status.inspect}): #{err}"
      written, epipe = err[/wrote (\d+) lines, (\d+) fibers saw EPIPE/, 0] && [$1.to_i, $2.to_i]
      refute_nil written, "the program's report: #{err}"
      assert_operator epipe, :>, 0, "no fiber saw EPIPE: #{err}"
      assert_operator written, :<, 10_000, "every line was written: head's end went unnoticed"
      c.note(err.lines.last.strip)
    end
  end

  # The program's fibers write 100 lines to standard output (unbuffered),
  # then, in the same group, `head -c 1MiB /dev/zero` writes to the same
  # pipe: the same open file description, whose flags are shared. The case
  # reads the lines, then stops reading until the pipe is full (head must
  # wait there), then reads the rest: head must have written all of it. If
  # the program left the description non-blocking, head's write into the
  # full pipe fails with EAGAIN and head dies ("Resource temporarily
  # unavailable").
  def test_sibling_writes_to_the_pipe_after_the_app
    clients_case("stdio", "{ app; head -c 1MiB; } > pipe: the pipe blocks after the app") do |c|
      reader, writer = IO.pipe
      writer.nonblock = false # as a shell makes it (Ruby's own pipes are non-blocking)
      err_reader, err_writer = IO.pipe
      app = AppsSuite.ruby_command("stdio_app.rb", "write", "4", "25").join(" ")
      pid = Process.spawn("sh", "-c", "#{app}; head -c #{ONE_MIB} /dev/zero", out: writer, err: err_writer)
      err_writer.close
      errors = c.fiber { err_reader.read }
      data = +""
      data << reader.readpartial(65_536) until data.count("\n") >= 100 || data.include?("\0")
      app_lines = data[0, data.index("\0") || data.size]
      zeros = data.size - app_lines.size
      # hold off until the pipe is full (or the shell gave up): head now
      # waits in write, or failed to
      capacity = reader.fcntl(Fcntl::F_GETPIPE_SZ)
      exited = nil
      deadline = c.now + 10
      until reader.nread >= capacity - 4096 || (exited = Process.wait2(pid, Process::WNOHANG)) || c.now > deadline
        sleep 0.005
      end
      nonblocking = writer.fcntl(Fcntl::F_GETFL) & File::NONBLOCK != 0
      writer.close
      zeros += reader.read.size
      _, status = exited || Process.wait2(pid)
      err = errors.value
      assert_equal 100, app_lines.lines.size, "the program's lines: #{app_lines.inspect}"
      assert_equal ONE_MIB, zeros, "head wrote #{zeros} of #{ONE_MIB} bytes; stderr: #{err.strip}; " \
                                   "the pipe #{nonblocking ? 'was left non-blocking' : 'is blocking'}"
      assert status.success?, "the group failed (#{status.inspect}): #{err.strip}"
      refute nonblocking, "the pipe was left O_NONBLOCK"
    ensure
      [reader, writer, err_reader].each { |io| io&.close unless io&.closed? }
    end
  end

  # A producer that pauses, as `tail -f` or a slow upstream does: seq writes
  # 10,000 numbers, then waits (up to 5 s) for the program to say "go"
  # through a FIFO before it writes 10,000 more. The program reads standard
  # input in one fiber; another fiber says "go" once the reader has the first
  # half, and can do so only if the reader's wait lets the loop run.
  def test_app_reading_stdin_from_a_pausing_producer
    clients_case("stdio", "seq | app: gets waits in a fiber, another runs") do |c|
      Dir.mktmpdir do |dir|
        fifo = File.join(dir, "go")
        File.mkfifo(fifo)
        # <> opens the FIFO without waiting for a writer; read -t bounds the wait
        producer = "exec 3<>#{fifo}; seq 1 10000; read -t 5 -u 3 answer || echo 'producer: no go in 5 s' >&2; seq 10001 20000"
        app = AppsSuite.ruby_command("stdio_app.rb", "sum", fifo, "10000").join(" ")
        out, err, status = pipeline(["bash", "-c", "set -o pipefail; { #{producer}; } | #{app}"])
        assert status.success?, "the pipeline failed (#{status.inspect}): #{err}"
        assert_equal "sum #{(1..20_000).sum}, the other fiber ran while the reader waited\n", out, "stderr: #{err.strip}"
        c.note("stderr: #{err.strip}") unless err.empty?
      end
    end
  end

  # Runs a command (its stdout and stderr read by two fibers), returns
  # [stdout, stderr, status].
  def pipeline(command)
    out_reader, out_writer = IO.pipe
    err_reader, err_writer = IO.pipe
    pid = Process.spawn(*command, out: out_writer, err: err_writer, in: File::NULL)
    [out_writer, err_writer].each(&:close)
    err = Thread::Queue.new
    Fiber.schedule { err << err_reader.read }
    out = out_reader.read
    _, status = Process.wait2(pid)
    [out, err.pop, status]
  ensure
    [out_reader, err_reader].each { |io| io&.close }
  end
end
