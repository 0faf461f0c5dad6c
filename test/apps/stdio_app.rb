# frozen_string_literal: true

# The program the stdio cases (stdio_test.rb) run as part of a shell
# pipeline, on the loop the case runs on (FARCE_CLIENTS_LOOP, FARCE_BACKEND,
# IO_EVENT_SELECTOR, passed on from the case):
#
#   ruby stdio_app.rb write FIBERS LINES   FIBERS fibers each write LINES
#       lines "fiber F line L" to $stdout, unbuffered. A fiber whose write finds the
#       reader gone (EPIPE: `app | head`) stops there, as a command-line
#       program should; at the end one line to $stderr counts them:
#       "wrote W lines, E fibers saw EPIPE". Exit status 0.
#   ruby stdio_app.rb sum FIFO HALF         one fiber reads $stdin line by
#       line; once it has read HALF lines, another fiber writes "go" to FIFO
#       (the producer waits for it before it sends the rest). Prints the sum
#       of the numbers and whether the other fiber ran.
mode, *args = ARGV

body = lambda do
  case mode
  when "write"
    fibers, lines = args.map { |a| Integer(a) }
    # each line written at once, as a program that logs to $stdout (a
    # 12-factor application, a CLI printing progress) does: so the writes go
    # through the scheduler while the fibers run, not at exit
    $stdout.sync = true
    written = 0
    epipe = 0
    done = Thread::Queue.new
    fibers.times do |f|
      Fiber.schedule do
        lines.times do |l|
          $stdout.write("fiber #{f} line #{l}\n")
          written += 1
        end
      rescue Errno::EPIPE
        epipe += 1
      ensure
        done << f
      end
    end
    fibers.times { done.pop }
    $stderr.puts "wrote #{written} lines, #{epipe} fibers saw EPIPE"
  when "sum"
    fifo = args.fetch(0)
    half = Integer(args.fetch(1))
    read = 0
    reading = true
    signalled = false
    # the other fiber: once the reader has the first half, it tells the
    # producer (through the fifo) to send the rest; it gets to run only if
    # the reader's wait for more input lets the loop run
    Fiber.schedule do
      while reading && !signalled
        sleep 0.001
        next unless read >= half

        File.open(fifo, "w") { |f| f.write("go\n") }
        signalled = true
      end
    end
    sum = 0
    begin
      while (line = $stdin.gets)
        sum += Integer(line)
        read += 1
      end
    ensure
      reading = false
    end
    $stdout.puts "sum #{sum}, #{signalled ? 'the other fiber ran while the reader waited' : 'the other fiber never ran'}"
  else
    abort "usage: stdio_app.rb write FIBERS LINES | sum FIFO HALF"
  end
end

if ENV["FARCE_CLIENTS_LOOP"] == "async"
  require "async"
  Sync { body.call }
else
  require "farce"
  Farce.run(&body)
end
