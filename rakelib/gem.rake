# frozen_string_literal: true

# The two gems:
#   rake gem:source   pkg/farce-VERSION.gem: compiled at install time with Go,
#                     its Go modules vendored so the install needs no network
#   rake gem:native   pkg/farce-VERSION-x86_64-linux.gem: the extension for
#                     Ruby 3.1 (host), 3.2 and 4.0 (built, .ci/ruby-build),
#                     3.3 and 3.4 (sid chroot) and the Go core, prebuilt;
#                     installs with no Go and no compiler
#                     (PLATFORM=aarch64-linux: the arm64 gem, rakelib/gem_aarch64.rake;
#                     PLATFORM=x64-mingw-ucrt: the Windows gem, rakelib/windows_gem.rake)
#   rake gem:check    installs each into an empty GEM_HOME on each of those
#                     (offline, and without Go for the native gem) and runs it
#
# A new Ruby release joins NATIVE_RUBIES (and RELEASES in .ci/ruby-build,
# RUBY_LEGS in rakelib/rubies.rb): the gem carries one extension per Ruby
# minor version, and a Ruby it has none for runs the pure-Ruby loop, saying
# the source gem compiles for it.
require "rubygems/package"
require_relative "rubies"

NATIVE_PLATFORM = "x86_64-linux"
NATIVE_RUBIES = %w[3.1 3.2 3.3 3.4 4.0].freeze

def gem_version
  Gem::Specification.load(File.join(ROOT, "farce.gemspec")).version.to_s
end

namespace :gem do
  desc "Build pkg/farce-VERSION.gem (source gem; Go modules vendored, builds offline)"
  task :source do
    Dir.chdir(ROOT) do
      # vendor/ exists only while the gem is built: in a checkout, Go would
      # otherwise prefer it over go.mod and need it kept in step by hand.
      raise "vendor/ exists; remove it first" if File.exist?("vendor")

      begin
        sh "go", "mod", "vendor"
        spec = Gem::Specification.load("farce.gemspec")
        FileUtils.mkdir_p("pkg")
        file = Gem::Package.build(spec)
        FileUtils.mv(file, File.join("pkg", file))
        puts "built pkg/#{file} (#{spec.files.count { |f| f.start_with?('vendor/') }} vendored files)"
      ensure
        FileUtils.rm_rf("vendor")
      end
    end
  end

  desc "Build pkg/farce-VERSION-#{NATIVE_PLATFORM}.gem for Ruby #{NATIVE_RUBIES.join(', ')} (no Go needed to install)"
  task :native do
    # PLATFORM=aarch64-linux: the arm64 gem, cross-built (rakelib/gem_aarch64.rake)
    platform = ENV.fetch("PLATFORM", NATIVE_PLATFORM)
    next Rake::Task["gem:native_aarch64"].invoke if platform == AARCH64_PLATFORM
    # PLATFORM=x64-mingw-ucrt: the Windows gem, cross-built (rakelib/windows_gem.rake)
    next Rake::Task["gem:native_windows"].invoke if platform == WINDOWS_PLATFORM
    unless platform == NATIVE_PLATFORM
      raise "PLATFORM=#{platform}: gem:native builds #{NATIVE_PLATFORM}, #{AARCH64_PLATFORM} or #{WINDOWS_PLATFORM}"
    end

    Dir.chdir(ROOT) do
      NATIVE_RUBIES.each do |v|
        # Each Ruby builds its extension into lib/farce/<v>/ (3.3 and 3.4 in
        # the chroot), not linked to Debian's libruby-X.Y.so by name (the
        # built Rubies link libruby statically: there is none to name).
        sh("env", "FARCE_LINK_LIBRUBY=0", *ruby_runner(v), "rake", "compile")
        extension = File.join("lib", "farce", v, "farce_ext.so")
        raise "#{extension} still needs libruby" if IO.popen(["objdump", "-p", extension], &:read).match?(/NEEDED\s+libruby/)
      end
      # One Go core for all: the host's build, linked against the oldest glibc
      # here (Debian 12's), which sets the gem's glibc floor.
      core = File.join("lib", "farce", RUBY_ABI, "libfarce_core.so")
      NATIVE_RUBIES.each { |v| FileUtils.cp(core, File.join("lib", "farce", v)) unless v == RUBY_ABI }

      spec = Gem::Specification.load("farce.gemspec")
      spec.platform = Gem::Platform.new(NATIVE_PLATFORM)
      spec.extensions = []
      spec.files = spec.files.reject { |f| f.start_with?("ext/", "internal/", "vendor/") || f.start_with?("go.") }
      spec.files += NATIVE_RUBIES.flat_map { |v| %w[farce_ext.so libfarce_core.so].map { |f| "lib/farce/#{v}/#{f}" } }
      spec.description = spec.description.sub(/This\s+source gem.*\z/m,
                                              "This gem is precompiled for x86_64 Linux (glibc) and Ruby " \
                                              "#{NATIVE_RUBIES.join(', ')}; other Rubies need the source gem.\n")
      FileUtils.mkdir_p("pkg")
      file = Gem::Package.build(spec)
      FileUtils.mv(file, File.join("pkg", file))
      puts "built pkg/#{file}"
    end
  end

  desc "Install both gems into empty GEM_HOMEs on Ruby #{NATIVE_RUBIES.join(', ')} and run Farce.run (offline; native: no Go)"
  task :check do
    sh({ "RUBIES" => ENV.fetch("RUBIES", NATIVE_RUBIES.join(" ")) }, "bash", File.join(ROOT, ".ci", "gem-install-check"),
       "pkg/farce-#{gem_version}.gem", "pkg/farce-#{gem_version}-#{NATIVE_PLATFORM}.gem")
  end
end

desc "Build both gems (gem:source, gem:native)"
task gem: %w[gem:source gem:native]
