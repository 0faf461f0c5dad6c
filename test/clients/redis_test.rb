# frozen_string_literal: true

require_relative "case_helper"
require "redis"

# Redis through redis-rb (4.x on Debian 12, its own Ruby driver; 5.x and
# later on sid, through redis-client): plain Ruby sockets, so every wait
# parks the fiber.
class ClientsRedisTest < Minitest::Test
  include ClientsSuite::Case

  def connect
    Redis.new(host: "127.0.0.1", port: ClientsSuite::REDIS_PORT, timeout: 10)
  end

  def key(name)
    "#{ClientsSuite::PREFIX}:#{name}"
  end

  def test_blpop_from_twenty_fibers_woken_by_a_pusher
    clients_case("redis", "BLPOP from 20 fibers, woken by a pusher fiber", needs: :redis) do |c|
      queue = key("queue")
      watcher = connect
      popped = c.fiber do
        c.fibers(20) do
          got = connect.then { |r| r.blpop(queue, timeout: 10).tap { r.close } }
          got or flunk "BLPOP timed out"
        end
      end
      # the pusher waits until all 20 are blocked in BLPOP, as the server sees it
      deadline = c.now + 10
      sleep 0.01 until blocked_clients(watcher) >= 20 || c.now > deadline
      assert_equal 20, blocked_clients(watcher), "the 20 BLPOPs never all blocked"
      pusher = c.fiber { connect.then { |r| Array.new(20) { |i| r.rpush(queue, "job #{i}").tap { sleep 0.001 } } } }
      lengths = pusher.value
      got = popped.value
      assert_equal Array.new(20) { queue }, got.map(&:first)
      assert_equal Array.new(20) { |i| "job #{i}" }.sort, got.map(&:last).sort
      assert lengths.all? { |n| n.is_a?(Integer) && n <= 1 }, "each push was popped at once (list lengths #{lengths})"
      watcher.close
    end
  end

  def test_ten_thousand_pipelined_commands_from_ten_fibers
    clients_case("redis", "10,000 pipelined commands from 10 fibers", needs: :redis) do |c|
      values = c.fibers(10) do |f|
        r = connect
        set = r.pipelined { |p| 500.times { |i| p.set(key("#{f}:#{i}"), "value #{f}-#{i}") } }
        got = r.pipelined { |p| 500.times { |i| p.get(key("#{f}:#{i}")) } }
        r.close
        [set, got]
      end
      values.each_with_index do |(set, got), f|
        assert_equal Array.new(500) { "OK" }, set
        assert_equal Array.new(500) { |i| "value #{f}-#{i}" }, got
      end
    end
  end

  def test_pub_sub
    clients_case("redis", "pub/sub: 20 messages to a subscriber fiber", needs: :redis) do |c|
      channel = key("channel")
      subscribed = Thread::Queue.new
      subscriber = c.fiber do
        got = []
        r = connect
        r.subscribe(channel) do |on|
          on.subscribe { |_ch, count| subscribed << count }
          on.message do |ch, message|
            got << [ch, message]
            r.unsubscribe(channel) if got.size == 20
          end
        end
        r.close
        got
      end
      assert_equal 1, subscribed.pop
      publisher = connect
      receivers = Array.new(20) { |i| publisher.publish(channel, "message #{i}") }
      assert_equal Array.new(20) { 1 }, receivers, "one subscriber got each message"
      assert_equal Array.new(20) { |i| [channel, "message #{i}"] }, subscriber.value
      publisher.close
    end
  end

  private

  def blocked_clients(redis)
    redis.info("clients")["blocked_clients"].to_i
  end
end
