# frozen_string_literal: true

require_relative "spec_helper"
require "farce"

# Contract examples farce is known to fail. Each entry is a bug report:
# remove it once farce is fixed (the run turns red when a pending example
# starts passing, which is the reminder).
FARCE_PENDING = {}.freeze

# io_uring is in the list only where this kernel lets us set up a ring;
# :ruby (farce's pure-Ruby loop) runs everywhere.
FARCE_BACKENDS = %i[io_uring epoll poll ruby].select do |backend|
  Farce::Scheduler.new(backend: backend).close
  true
rescue Farce::Error => e
  warn "farce spec: skipping backend #{backend.inspect}: #{e.message}"
  false
end.freeze

RSpec.describe Farce::Scheduler do
  FARCE_BACKENDS.each do |backend|
    context "with backend #{backend.inspect}" do
      it_behaves_like "a Fiber::Scheduler", -> { Farce::Scheduler.new(backend: backend) }, pending: FARCE_PENDING

      it "uses the backend it was asked for, with no fallback" do
        scheduler = described_class.new(backend: backend)
        expect(scheduler.backend).to eq(backend)
        if backend == :ruby
          expect(scheduler.fallback_reason).to match(/asked for the Ruby loop/) # why it is not native
        else
          expect(scheduler.fallback_reason).to be_nil
        end
        scheduler.close
      end
    end
  end

  describe "backend selection" do
    it "picks an available backend for :auto and explains any fallback" do
      scheduler = described_class.new(backend: :auto)
      expect(%i[io_uring epoll poll]).to include(scheduler.backend)
      expect(scheduler.fallback_reason).to be_nil.or be_a(String)
      expect(scheduler.fallback_reason).to be_a(String) if scheduler.backend == :poll
      scheduler.close
    end

    it "rejects an unknown backend, naming the choices" do
      expect { described_class.new(backend: :nope) }.to raise_error(ArgumentError, /:nope.*:epoll/)
      expect { described_class.new(backend: 42) }.to raise_error(ArgumentError)
    end
  end

  describe "#closed? and #close" do
    it "is open until closed, closes idempotently and then refuses work" do
      scheduler = described_class.new
      expect(scheduler.closed?).to be(false)
      expect(scheduler.inspect).to include("backend=:")
      scheduler.close
      expect(scheduler.closed?).to be(true)
      expect(scheduler.inspect).to include("backend=closed")
      expect { scheduler.close }.not_to raise_error
      expect { scheduler.stats }.to raise_error(Farce::Error)
      expect { scheduler.run }.to raise_error(Farce::Error)
    end

    it "is closed once Fiber.set_scheduler(nil) has run its fibers" do
      got = with_scheduler(-> { described_class.new }) do |scheduler|
        Fiber.schedule { sleep 0.01 }
        before = scheduler.closed?
        Fiber.set_scheduler(nil)
        [before, scheduler.closed?]
      end
      expect(got).to eq([false, true])
    end

    it "runs the remaining fibers when #close is called directly" do
      done = []
      with_scheduler(-> { described_class.new }) do |scheduler|
        Fiber.schedule { sleep 0.02; done << :finished }
        scheduler.close
        done << [:closed, scheduler.closed?]
      end
      expect(done).to eq([:finished, [:closed, true]])
    end

    it "stays usable after a fiber's exception propagated out of #run" do
      got = []
      with_scheduler(-> { described_class.new }) do |scheduler|
        Fiber.schedule { sleep 0.01; raise FiberSchedulerContract::Boom, "first" }
        Fiber.schedule { sleep 0.03; got << :survivor }
        begin
          scheduler.run
        rescue FiberSchedulerContract::Boom => e
          got << e.message
        end
        got << scheduler.closed?
      end
      expect(got).to eq(["first", false, :survivor])
    end
  end

  describe "#stats" do
    it "counts fibers, parked fibers, timers and descriptors" do
      stats = nil
      with_scheduler(-> { described_class.new }) do |scheduler|
        r, w = IO.pipe
        Fiber.schedule { r.read(1) }
        Fiber.schedule { sleep 0.05 }
        stats = scheduler.stats
        w.write("x")
        Fiber.set_scheduler(nil)
        [r, w].each(&:close)
      end
      expect(stats).to include(fibers: 2, parked_fibers: 2)
      expect(stats[:timers]).to be >= 1
      expect(stats[:registered_descriptors]).to be >= 1
      expect(stats[:backend]).to be_a(Symbol)
      %i[pending_waits ready_waits iterations completed_waits goroutines].each do |key|
        expect(stats[key]).to be_an(Integer).and be >= 0
      end
    end
  end
end
