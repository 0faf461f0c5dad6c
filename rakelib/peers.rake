# frozen_string_literal: true

# rake test:peers: the own suites of the projects farce stands in for or
# serves (io-event's selector suite, Async's, Falcon's) and a serving check
# with real Falcon, each under io-event's EPoll and under Farce, on Ruby 3.3
# (the sid chroot, where Debian has sus and Falcon's dependencies). A test
# that passes under EPoll and not under Farce fails the task; see
# test/peers/run.rb. The suites are test data kept outside the repository:
# FARCE_PEER_SUITES names their folder (.ci/run sets it); without it the task
# says so and skips. PEERS="io-event async falcon serving" picks parts.
namespace :test do
  desc "The peers' own suites (io-event, Async, Falcon) + Falcon serving, EPoll vs Farce, Ruby 3.3 (FARCE_PEER_SUITES=DIR)"
  task :peers do
    dir = ENV["FARCE_PEER_SUITES"].to_s
    if dir.empty?
      puts "test:peers: SKIPPED: FARCE_PEER_SUITES is not set. It names the folder with the peers' own suites " \
           "(io-event's, Async's, Falcon's), test data kept outside this repository; .ci/run sets it."
      next
    end
    abort "test:peers: FARCE_PEER_SUITES=#{dir} is not a folder" unless File.directory?(dir)
    dir = File.realpath(dir)
    parts = ENV.fetch("PEERS", "").split
    started = Time.now
    if RUBY_ABI == "3.3"
      Rake::Task[:compile].invoke
      sh({ "FARCE_PEER_SUITES" => dir }, RbConfig.ruby, "test/peers/run.rb", *parts)
    else
      Rake::Task["test:chroot"].invoke
      sh "go", "mod", "download" # the chroot builds from the host's module cache (GOPROXY=off there)
      sh "env", "SID_RUBY=3.3", SID_RUN, "rake", "compile"
      # the suites' folder appears in the chroot at the same path
      sh({ "SID_RUBY" => "3.3", "SID_BIND" => dir, "FARCE_PEER_SUITES" => dir }, SID_RUN, "ruby", "test/peers/run.rb", *parts)
    end
    puts "test:peers: #{(Time.now - started).round} s"
  end
end
