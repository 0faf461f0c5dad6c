# frozen_string_literal: true

# The application the Falcon serving check (test/peers/falcon_serving.rb)
# runs on real Falcon with farce's selector. Each /wake/* path makes the
# request's fiber wait for something a plain thread does, so the fiber is
# woken from another thread: Async's Scheduler#unblock, which pushes the fiber
# onto the selector and wakes it from that thread. A selector that refuses or
# loses that wake-up leaves the request without an answer.
paths = {
  "/" => -> { "ok" },
  "/pid" => -> { Process.pid.to_s },
  # Thread#value: the fiber joins a thread (block hook), the thread's end unblocks it.
  "/wake/thread-value" => -> { Thread.new { sleep 0.01; "thread-value" }.value },
  # Thread::Queue: pop waits, a plain thread pushes.
  "/wake/queue" => lambda {
    queue = Thread::Queue.new
    Thread.new { sleep 0.01; queue.push("queue") }
    queue.pop
  },
  # Mutex: a plain thread holds the lock, the fiber waits for it in lock.
  "/wake/mutex" => lambda {
    mutex = Mutex.new
    holder = Thread.new { mutex.synchronize { sleep 0.02 } }
    Thread.pass until mutex.locked? # not a queue: that would be the queue case again
    body = mutex.synchronize { "mutex" }
    holder.join
    body
  },
  # IO.select: Async runs it on a helper thread, whose end wakes the fiber.
  "/wake/io-select" => lambda {
    reader, writer = IO.pipe
    thread = Thread.new { sleep 0.01; writer.write("x") }
    ready = IO.select([reader], nil, nil, 10)
    # Closing the pipe while the thread is still inside write makes Ruby raise
    # IOError into that thread, possibly inside Async's unblock of this fiber:
    # the wake-up is then lost under any selector. So: the thread ends first.
    thread.join
    reader.close
    writer.close
    ready ? "io-select" : "io-select timed out"
  },
  # In flight when the server is told to stop.
  "/slow" => -> { sleep 0.3; "slow" },
}

run do |env|
  handler = paths[env["PATH_INFO"]]
  if handler
    [200, { "content-type" => "text/plain" }, [handler.call]]
  else
    [404, { "content-type" => "text/plain" }, ["no such path"]]
  end
end
