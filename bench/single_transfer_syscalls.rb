# frozen_string_literal: true

# System calls per round trip of a one-byte ping-pong between two fibers,
# through Ruby 4.1's version 4 read/write hooks and through the 3.x ones, the
# hooks called by hand (no Ruby here calls the version 4 forms itself): the
# version 4 read is driven as Ruby 4.1's IO layer drives it (the hook, then
# io_wait and the hook again after -EAGAIN). Pipes and socketpairs, in
# alternating runs; stats[:system_calls] is the driver's calls plus the
# reads and writes the extension made itself.
#
#   ruby -Ilib bench/single_transfer_syscalls.rb                 # io_uring, this Ruby
#   .ci/ruby-run 4.0 ruby -Ilib bench/single_transfer_syscalls.rb
#   BACKEND=epoll ROUNDS=5000 RUNS=3 ruby -Ilib bench/single_transfer_syscalls.rb
#   .ci/ruby-run 4.1 ruby -I tmp/single-transfer-4.1/lib bench/single_transfer_syscalls.rb
#     (the build rake test:single_transfer made: the version 4 forms are io_read itself;
#     set FARCE_HOOK_FORMS_UNCHECKED=1, since that Ruby calls the old forms)
require "farce"
require "socket"
Warning[:experimental] = false # IO::Buffer's warning
EAGAIN = -Errno::EAGAIN::Errno
ROUNDS = Integer(ENV.fetch("ROUNDS", "20000"))

def v4(s, name, *a)
  Farce::SINGLE_TRANSFER_HOOKS ? s.public_send(name, *a) : s.__send__(:"__#{name}_v4", *a)
end

# one transfer as Ruby 4.1's IO layer drives it: the hook, then io_wait and again on -EAGAIN
def v4_read(s, io, buf)
  loop do
    n = v4(s, :io_read, io, buf, 0, buf.size)
    return n unless n == EAGAIN
    s.io_wait(io, IO::READABLE, nil)
  end
end

def v4_write(s, io, buf)
  loop do
    n = v4(s, :io_write, io, buf, 0, 1)
    return n unless n == EAGAIN
    s.io_wait(io, IO::WRITABLE, nil)
  end
end

def v3_read(s, io, buf) = s.method(:io_read).arity == 3 ? s.io_read(io, buf, 1) : s.io_read(io, buf, 1, 0)
def v3_write(s, io, buf) = s.method(:io_write).arity == 3 ? s.io_write(io, buf, 1) : s.io_write(io, buf, 1, 0)

def pair(kind)
  kind == :pipe ? [IO.pipe, IO.pipe] : [UNIXSocket.pair, UNIXSocket.pair].map { |a, b| [a, b] }
end

def run(path, kind)
  s = Farce::Scheduler.new(backend: (ENV["BACKEND"] || "io_uring").to_sym)
  (r1, w1), (r2, w2) = pair(kind)
  rd = path == :v4 ? method(:v4_read) : method(:v3_read)
  wr = path == :v4 ? method(:v4_write) : method(:v3_write)
  before = nil
  t0 = nil
  Fiber.set_scheduler(s)
  Fiber.schedule do # the echo side
    b = IO::Buffer.new(8192)
    o = IO::Buffer.new(1)
    ROUNDS.times { rd.(s, r1, b); wr.(s, w2, o) }
  end
  Fiber.schedule do
    b = IO::Buffer.new(8192)
    o = IO::Buffer.new(1)
    100.times { wr.(s, w1, o); rd.(s, r2, b) } # warm-up
    before = s.stats
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    (ROUNDS - 100).times { wr.(s, w1, o); rd.(s, r2, b) }
    after = s.stats
    el = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    n = ROUNDS - 100.0
    $result = [(after[:system_calls] - before[:system_calls]) / n,
               (after[:transfer_calls] - before[:transfer_calls]) / n,
               (after[:io_uring_enters] - before[:io_uring_enters]) / n,
               (after[:completion_ops_submitted] - before[:completion_ops_submitted]) / n,
               el / n * 1e6]
  end
  Fiber.set_scheduler(nil)
  [r1, w1, r2, w2].each(&:close)
  $result
end

paths = Farce::SINGLE_TRANSFER_HOOKS ? [:v4] : [:v4, :v3]
res = Hash.new { |h, k| h[k] = [] }
Integer(ENV.fetch("RUNS", "3")).times do
  %i[pipe socketpair].each { |kind| paths.each { |pa| res[[pa, kind]] << run(pa, kind) } }
end
puts "Ruby #{RUBY_VERSION} #{Farce::SINGLE_TRANSFER_HOOKS ? '(v4 build)' : ''} backend #{ENV['BACKEND'] || 'io_uring'}, #{ROUNDS} round trips, alternating runs"
res.each do |(pa, kind), runs|
  runs.each_with_index do |(sys, tr, ent, ops, us), i|
    printf("%-3s %-10s run %d: system_calls %.3f/rt (transfer %.3f, io_uring_enter %.3f), ops %.3f/rt, %.2f us/rt\n", pa, kind, i + 1, sys, tr, ent, ops, us)
  end
end
