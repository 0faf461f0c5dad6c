# frozen_string_literal: true

# The Windows gem (x64-mingw-ucrt), built on this Linux machine:
#   rake gem:native PLATFORM=x64-mingw-ucrt   pkg/farce-VERSION-x64-mingw-ucrt.gem
#                                             (gem:native_windows) from
#                                             compile:windows' build
#   rake gem:check_windows                    installs it with the Windows Ruby's
#                                             own gem under wine and runs it
require_relative "platform_gem"
require_relative "windows"

namespace :gem do
  desc "Build pkg/farce-VERSION-#{WINDOWS_PLATFORM}.gem for the Windows Ruby in FARCE_WINDOWS_RUBIES (sid chroot)"
  task :native_windows do
    ruby, why = windows_ruby
    raise "gem:native_windows: #{why}" unless ruby

    Rake::Task["compile:windows"].invoke
    abi = windows_ruby_abi(ruby)
    binaries = %w[farce_ext.so farce_core.dll].to_h { |f| ["lib/farce/#{abi}/#{f}", File.join(WINDOWS_STAGE, "farce", abi, f)] }
    build_platform_gem(WINDOWS_PLATFORM, binaries,
                       "Windows (x64-mingw-ucrt, RubyInstaller's Rubies) and Ruby #{abi}, on the IOCP backend")
  end

  desc "Install pkg/farce-VERSION-#{WINDOWS_PLATFORM}.gem with the Windows Ruby's gem under wine into an empty " \
       "GEM_HOME and run Farce.run on IOCP from outside the checkout"
  task :check_windows do
    ruby, why = windows_ruby
    next puts("gem:check_windows: SKIPPED: #{why}") unless ruby

    gem = File.join(ROOT, "pkg", "farce-#{gem_version}-#{WINDOWS_PLATFORM}.gem")
    raise "#{gem} missing: rake gem:native PLATFORM=#{WINDOWS_PLATFORM}" unless File.file?(gem)

    work = File.join(ROOT, "tmp", "windows-gem-check")
    FileUtils.rm_rf(work)
    FileUtils.mkdir_p(File.join(work, "home"))
    # This Windows Ruby has no psych (no libyaml for Windows in Debian) and
    # no openssl: `gem install` reads the gem's spec from a Ruby gemspec
    # written here instead of its YAML metadata, skips the checksums file
    # and digests with Ruby's digest extension. The install itself (files,
    # platform match, the specification it writes) is RubyGems' own.
    File.write(File.join(work, "farce.gemspec"), Gem::Package.new(gem).spec.to_ruby)
    File.write(File.join(work, "no_psych.rb"), <<~RUBY)
      require "rubygems"
      module Gem
        def self.load_yaml; end
        module SafeYAML
          def self.safe_load(*) = nil
          def self.load(*) = nil
        end
      end
      class Gem::Specification
        def self.from_yaml(_input) = Gem::Specification.load(#{File.join(work, 'farce.gemspec').dump})
      end
      require "digest/sha2"
      require "rubygems/security"
      Gem::Security.singleton_class.prepend(Module.new { def create_digest(name = "SHA256") = Digest.const_get(name.to_s.upcase).new })
    RUBY
    home = "Z:#{File.join(work, 'home')}" # a drive-letter path: RubyGems refuses to install under a rootless one
    ruby_exe = File.join(ruby, "bin", "ruby.exe")
    out, ok = wine_run(ruby_exe, ["-r", "./no_psych.rb", "-e", "'require \"rubygems/gem_runner\"; Gem::GemRunner.new.run(ARGV)'",
                                  "install", "--local", "--no-document", gem],
                       dir: work, seconds: 300, env: { "GEM_HOME" => home, "GEM_PATH" => home })
    raise "gem:check_windows: install failed:\n#{out}" unless ok

    File.write(File.join(work, "check.rb"), <<~'RUBY')
      require "farce"
      where = $LOADED_FEATURES.grep(/farce_ext/).first
      abort "farce loaded from #{where}, not from GEM_HOME" unless where.start_with?(ENV["GEM_HOME"])
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Farce.run { 100.times { Fiber.schedule { sleep 0.1 } } }
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
      puts "#{where.sub(ENV['GEM_HOME'], '$GEM_HOME')}: 100 fibers sleeping 0.1 s in #{took.round(3)} s, " \
           "backend == :iocp: #{Farce::Scheduler.new.backend == :iocp}, Farce.backends #{Farce.backends}"
    RUBY
    # from outside the checkout, so nothing but the installed gem can be found
    out, ok = wine_run(ruby_exe, [File.join(work, "check.rb")], dir: "/", seconds: 120,
                                                                env: { "GEM_HOME" => home, "GEM_PATH" => home })
    puts "gem:check_windows: #{out.strip}"
    raise "gem:check_windows: Farce.run failed" unless ok && out.include?("backend == :iocp: true")
  end
end
