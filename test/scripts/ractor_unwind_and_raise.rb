# Child script of test/test_ractors.rb: a Ractor whose Farce.run raises
# while 5 of its fibers are parked (in a sleep, a Queue#pop, a pipe read, a
# Mutex, an untimed block), next to a Ractor running 300 ping-pong round
# trips at the same time. The parked fibers are unwound, each ensure clause
# sends its name to the main Ractor; the raise reaches the main Ractor as
# the Ractor's error; the other Ractor is not disturbed. Prints
# "UNWOUND names.inspect", "RAISED class message", "PINGS n" and "DONE".
# BACKEND, AT_ONCE (false: the ping-pong Ractor starts once the other has
# ended, for the Rubies whose fibers cannot run in two Ractors at once) and
# SCRIPTS_DIR are set before this code.
require File.join(SCRIPTS_DIR, "ractor_support")
require "socket"

main = Ractor.current
raiser = Ractor.new(BACKEND, main) do |backend, to|
  queue = Thread::Queue.new
  mutex = Thread::Mutex.new
  rd, _wr = IO.pipe
  holder_ready = false
  Farce.run(backend: backend) do
    Fiber.schedule { mutex.synchronize { holder_ready = true; sleep } } # holds the Mutex for good
    waits = {
      sleep: -> { sleep },
      queue: -> { queue.pop },
      pipe: -> { rd.read(1) },
      mutex: -> { mutex.synchronize { nil } },
      block: -> { Fiber.scheduler.block(nil, nil) },
    }
    waits.each do |name, wait|
      Fiber.schedule do
        wait.call
      ensure
        to.send(name)
      end
    end
    sleep 0.01 until holder_ready
    sleep 0.05 # every fiber parked by now
    raise ArgumentError, "the Ractor's run ends here"
  end
end

raised = begin
  value_of(raiser) unless AT_ONCE
  nil
rescue Ractor::RemoteError => e
  e
end

pinger = Ractor.new(BACKEND) do |backend|
  a, b = UNIXSocket.pair
  rounds = 0
  Farce.run(backend: backend) do
    Fiber.schedule { 300.times { b.write(b.readpartial(8)) } }
    Fiber.schedule do
      300.times do |i|
        a.write(i.to_s)
        rounds += 1 if a.readpartial(8) == i.to_s
        sleep 0.001 if i % 50 == 0 # spread over the other Ractor's raise
      end
    end
  end
  rounds
end

begin
  raise raised if raised

  value_of(raiser) if AT_ONCE
  puts "RAISED nothing"
rescue Ractor::RemoteError => e
  puts "RAISED #{e.cause.class} #{e.cause.message}"
end
# sent before the raise reached us; bounded, so that a lost one fails the count
receiver = Thread.new { unwound = []; 5.times { unwound << Ractor.receive }; unwound }
puts "UNWOUND #{(receiver.join(10) && receiver.value).to_a.sort.inspect}"
puts "PINGS #{value_of(pinger)}"
puts "DONE"
