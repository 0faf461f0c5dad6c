# frozen_string_literal: true

require_relative "apps_helper"
require "active_record"
# the adapters now, in the test process, not in each case's child (a require
# there holds the loop for its file search)
require "active_record/connection_adapters/postgresql_adapter"
require "active_record/connection_adapters/mysql2_adapter"

# ActiveRecord 7.2 as an application on a fiber scheduler runs it: each
# fiber its own connection lease (ActiveSupport's isolation_level = :fiber,
# what Rails sets for Falcon), one pool of 5 per database. The fibers that
# find the pool empty wait in its queue (a Monitor's condition variable:
# the scheduler's block/unblock hooks); every connection must come back.
class AppsActiveRecordTest < Minitest::Test
  include ClientsSuite::Case

  ActiveSupport::IsolatedExecutionState.isolation_level = :fiber

  # The model of the cases; its table is made by each case (a name of the
  # case's own).
  class Widget < ActiveRecord::Base
  end

  def test_postgresql_pool_of_five
    clients_case("activerecord", "pg: pool 5, 100 fibers, then 2,000 short-lived", needs: :pg) do |c|
      ActiveRecord::Base.establish_connection(AppsSuite.activerecord_pg(pool: 5, checkout_timeout: 10))
      pool_case(c, "SELECT 1 FROM pg_sleep(0.01)")
    end
  end

  def test_mysql2_pool_of_five
    clients_case("activerecord", "mysql2: pool 5, 100 fibers, then 2,000 short-lived", needs: :mysql,
                                                                                  blocks: "Mysql2::Client.new") do |c|
      AppsSuite.ensure_mysql_database
      ActiveRecord::Base.establish_connection(adapter: "mysql2", host: "127.0.0.1", port: ClientsSuite::MYSQL_PORT,
                                              username: "root", database: AppsSuite::MYSQL_DATABASE, pool: 5,
                                              checkout_timeout: 10, connect_timeout: 5)
      pool_case(c, "SELECT SLEEP(0.01)")
    end
  end

  # 100 fibers each write a row in a transaction that also waits on the
  # server (so each holds its connection across a wait while 95 others queue
  # for one), then read it back; then 2,000 fibers each read one row and end.
  # Checked: every answer; the first 5 fibers meet at a gate while each
  # holds its connection (the pool served 5 at once: no timing needed);
  # afterwards none busy, none waiting, no connection owned by anyone, never
  # more than 5.
  def pool_case(c, sleep_sql)
    pool = ActiveRecord::Base.connection_pool
    Widget.table_name = AppsSuite.table("widgets")
    pool.with_connection { |conn| conn.create_table(Widget.table_name, force: true) { |t| t.integer :n, null: false } }
    gate = AppsSuite::Gate.new(5)
    values = c.fibers(100) do |i|
      met = Widget.transaction do
        Widget.create!(n: i)
        Widget.with_connection do |conn|
          conn.select_value(sleep_sql)
          gate.pass
        end
      end
      [Widget.where(n: i).pick(:n), met]
    end
    assert_equal (0...100).to_a, values.map(&:first)
    assert values.all?(&:last), "5 fibers never held the pool's 5 connections at once"
    assert_all_back(pool)
    c.note("after 100: #{pool.stat.slice(:connections, :busy, :idle, :waiting)}")
    values = c.fibers(2000) { |i| Widget.where(n: i % 100).pick(:n) }
    assert_equal Array.new(2000) { |i| i % 100 }, values
    assert_all_back(pool)
    pool.with_connection { |conn| conn.drop_table(Widget.table_name) }
    ActiveRecord::Base.connection_handler.clear_all_connections!
  end

  def assert_all_back(pool)
    stat = pool.stat
    assert_operator stat[:connections], :<=, 5, "more connections than the pool's size: #{stat}"
    assert_equal 0, stat[:busy], "connections still checked out: #{stat}"
    assert_equal 0, stat[:waiting], "fibers still waiting for a connection: #{stat}"
    assert_equal [], pool.connections.select(&:in_use?).map { |conn| conn.owner.inspect }, "connections still owned"
  end
end
