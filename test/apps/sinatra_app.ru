# frozen_string_literal: true

# The application the Falcon case (falcon_test.rb) serves on real Falcon: a
# Sinatra app on ActiveRecord with a pool of 5 PostgreSQL connections, each
# request's fiber leasing its own (isolation_level = :fiber, as an
# application on Falcon runs ActiveRecord). The table comes from the case
# (FARCE_APPS_TABLE, rows id 1..100, hits 0).
#
#   GET  /widgets/:id       the row as "id name hits", after a short query
#                           (pg_sleep(0.005)) that keeps the pool busy
#   POST /widgets/:id/hit   hits + 1 in a transaction holding the row's lock
#   GET  /pool              "size connections busy waiting peak": the pool's
#                           counts, and the most requests of /widgets in
#                           flight at once so far
#   GET  /selector          the io-event selector Async runs on here
require "sinatra/base"
require "active_record"

ActiveSupport::IsolatedExecutionState.isolation_level = :fiber
ActiveRecord::Base.establish_connection(ENV.fetch("FARCE_APPS_DATABASE_URL"))

class Widget < ActiveRecord::Base
  self.table_name = ENV.fetch("FARCE_APPS_TABLE")
end

class WidgetsApp < Sinatra::Base
  # requests are fibers of one thread (falcon serve --threaded -n 1)
  @in_flight = 0
  @peak = 0
  class << self
    attr_accessor :in_flight, :peak
  end

  set :logging, false
  set :show_exceptions, false
  set :host_authorization, { permitted_hosts: [] }

  get "/widgets/:id" do
    app = self.class
    app.in_flight += 1
    app.peak = app.in_flight if app.in_flight > app.peak
    begin
      Widget.with_connection { |c| c.select_value("SELECT 1 FROM pg_sleep(0.005)") }
      widget = Widget.find(Integer(params[:id]))
    ensure
      app.in_flight -= 1
    end
    content_type "text/plain"
    "#{widget.id} #{widget.name} #{widget.hits}"
  end

  post "/widgets/:id/hit" do
    hits = Widget.transaction do
      widget = Widget.lock.find(Integer(params[:id]))
      widget.update!(hits: widget.hits + 1)
      widget.hits
    end
    content_type "text/plain"
    hits.to_s
  end

  get "/pool" do
    stat = ActiveRecord::Base.connection_pool.stat
    content_type "text/plain"
    [*stat.values_at(:size, :connections, :busy, :waiting), self.class.peak].join(" ")
  end

  get "/selector" do
    content_type "text/plain"
    Fiber.scheduler.instance_variable_get(:@selector).class.name
  end
end

run WidgetsApp
