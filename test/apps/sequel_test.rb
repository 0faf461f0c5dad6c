# frozen_string_literal: true

require_relative "apps_helper"
require "sequel"
# the adapters now, in the test process, not in each case's child
require "sequel/adapters/postgres"
require "sequel/adapters/mysql2"
Sequel.extension :fiber_concurrency

# Sequel's connection pool shared by 50 fibers. Sequel hands a connection to
# the current thread unless its fiber_concurrency extension is loaded, which
# makes the current fiber the owner: what an application on a fiber
# scheduler loads (without it, the 50 fibers of one thread would share one
# connection). The fibers that find the pool empty wait on its
# ConditionVariable (or queue) with pool_timeout.
class AppsSequelTest < Minitest::Test
  include ClientsSuite::Case

  def test_postgresql_pool_shared_by_fifty_fibers
    clients_case("sequel", "pg: pool of 5 shared by 50 fibers", needs: :pg) do |c|
      pool_case(c, "SELECT 1 AS one FROM pg_sleep(0.02)", **AppsSuite.sequel_pg)
    end
  end

  def test_mysql2_pool_shared_by_fifty_fibers
    clients_case("sequel", "mysql2: pool of 5 shared by 50 fibers", needs: :mysql, blocks: "Mysql2::Client.new") do |c|
      AppsSuite.ensure_mysql_database
      pool_case(c, "SELECT SLEEP(0.02) AS one",
                adapter: "mysql2", host: "127.0.0.1", port: ClientsSuite::MYSQL_PORT, user: "root",
                database: AppsSuite::MYSQL_DATABASE, connect_timeout: 5)
    end
  end

  # 50 fibers: each a transaction of two inserts around a wait on the server,
  # holding its connection meanwhile, then a read of its rows. Checked: every
  # row; the first 5 fibers meet at a gate while each holds its connection
  # (the pool served 5 at once); afterwards all back in the pool, no fiber
  # waiting.
  def pool_case(c, sleep_sql, **options)
    Sequel.extension :fiber_concurrency
    db = Sequel.connect(max_connections: 5, pool_timeout: 10, **options)
    table = AppsSuite.table("events").to_sym
    db.create_table!(table) do
      Integer :fiber, null: false
      Integer :step, null: false
    end
    gate = AppsSuite::Gate.new(5)
    results = c.fibers(50) do |i|
      met = db.transaction do
        db[table].insert(fiber: i, step: 1)
        db.fetch(sleep_sql).all
        passed = gate.pass
        db[table].insert(fiber: i, step: 2)
        passed
      end
      [db[table].where(fiber: i).order(:step).select_map(:step), met]
    end
    assert_equal Array.new(50) { [1, 2] }, results.map(&:first)
    assert_equal 100, db[table].count
    assert results.all?(&:last), "5 fibers never held the pool's 5 connections at once"
    assert_operator db.pool.size, :<=, 5
    assert_equal 0, db.pool.num_waiting, "fibers still waiting for a connection"
    # all_connections yields the idle ones (this fiber holds none): all of them
    idle = 0
    db.pool.all_connections { idle += 1 }
    assert_equal db.pool.size, idle, "connections not given back"
    c.note("pool #{db.pool.class.name.split('::').last}, #{db.pool.size} connections")
    db.drop_table(table)
    db.disconnect
  end
end
