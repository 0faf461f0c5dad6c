# frozen_string_literal: true

# The aarch64-linux gem, built on an x86_64 machine:
#   rake gem:native PLATFORM=aarch64-linux   pkg/farce-VERSION-aarch64-linux.gem
#   rake gem:check_aarch64                   installs it into an empty GEM_HOME in
#                                            each arm64 root (qemu-user, no Go) and
#                                            runs Farce.run and the test subset there
#
# The Go core is cross-compiled (GOARCH=arm64, CGO_ENABLED=1,
# CC=aarch64-linux-gnu-gcc); the extension is compiled with that same cross
# compiler against each arm64 Ruby's own headers and rbconfig.rb, taken from
# the arm64 Debian roots .ci/arm64-setup makes: ext/farce/extconf.rb runs on
# the host's Ruby with rakelib/cross_rbconfig.rb standing in for RbConfig
# (the way rake-compiler cross-compiles). Both link against the cross
# toolchain's glibc (Debian 12's), the gem's glibc floor, as for x86_64.
#
# The Rubies are those an arm64 Debian root offers: 3.1 (bookworm), 3.3 (sid)
# and 3.4 (experimental). Other Rubies the x86_64 gem may carry have no arm64
# Debian package here, so the aarch64 gem leaves them to the source gem.
require_relative "platform_gem"

AARCH64_PLATFORM = "aarch64-linux"
AARCH64_ROOTS = ENV.fetch("ARM64_ROOTS", "/opt/rubies")
AARCH64_ALL_RUBIES = { "3.1" => "arm64-bookworm", "3.3" => "arm64-sid", "3.4" => "arm64-sid" }.freeze
# ARM64_RUBIES="3.1" builds a gem for fewer Rubies (while trying things out)
AARCH64_RUBIES = AARCH64_ALL_RUBIES.slice(*ENV.fetch("ARM64_RUBIES", AARCH64_ALL_RUBIES.keys.join(" ")).split).freeze
AARCH64_CC = "aarch64-linux-gnu-gcc"

def aarch64_root(version)
  File.join(AARCH64_ROOTS, AARCH64_RUBIES.fetch(version))
end

# The target's rbconfig.rb (Debian: /usr/lib/aarch64-linux-gnu/ruby/X.Y.0/).
def aarch64_rbconfig(version)
  path = File.join(aarch64_root(version), "usr/lib/aarch64-linux-gnu/ruby", "#{version}.0", "rbconfig.rb")
  raise "#{path} missing: run .ci/arm64-setup (and ruby#{version}-dev there)" unless File.file?(path)

  path
end

namespace :gem do
  desc "Build pkg/farce-VERSION-#{AARCH64_PLATFORM}.gem on this x86_64 machine " \
       "(Ruby #{AARCH64_RUBIES.keys.join(', ')}; needs #{AARCH64_CC} and .ci/arm64-setup's roots)"
  task :native_aarch64 do
    Dir.chdir(ROOT) do
      raise "#{AARCH64_CC} missing: apt-get install gcc-aarch64-linux-gnu" unless system("command -v #{AARCH64_CC} >/dev/null")

      env = { "GOARCH" => "arm64", "GOOS" => "linux", "CGO_ENABLED" => "1", "CC" => AARCH64_CC, "RUBYOPT" => nil,
              "RUBYLIB" => nil }
      binaries = {}
      AARCH64_RUBIES.each_key do |v|
        build = File.join(ROOT, "tmp", "build-#{AARCH64_PLATFORM}-#{v}")
        FileUtils.rm_rf(build)
        FileUtils.mkdir_p(build)
        cross = env.merge("FARCE_CROSS_RBCONFIG" => aarch64_rbconfig(v), "FARCE_CROSS_SYSROOT" => aarch64_root(v))
        Dir.chdir(build) do
          sh cross, RbConfig.ruby, "--disable-gems", "-r", File.join(ROOT, "rakelib", "cross_rbconfig.rb"),
             File.join(ROOT, "ext", "farce", "extconf.rb")
          # Not linked to libruby-X.Y.so by name, as for x86_64 (the Ruby
          # loading the extension provides those symbols).
          sh cross, "make", "-j2", "LIBRUBYARG_SHARED="
        end
        %w[farce_ext.so libfarce_core.so].each do |f|
          file = File.join(build, f)
          header = File.binread(file, 20)
          # ELF e_machine 183 (EM_AARCH64) at offset 18, little-endian
          raise "#{file} is not an aarch64 ELF object" unless header.start_with?("\x7fELF".b) && header.byteslice(18, 2).unpack1("v") == 183

          binaries["lib/farce/#{v}/#{f}"] = file
        end
        needed = IO.popen(["aarch64-linux-gnu-objdump", "-p", File.join(build, "farce_ext.so")], &:read)
        raise "#{build}/farce_ext.so still needs libruby" if needed.match?(/NEEDED\s+libruby/)
      end
      # One Go core for all, as for x86_64 (each build made the same one).
      first = binaries.fetch("lib/farce/#{AARCH64_RUBIES.keys.first}/libfarce_core.so")
      AARCH64_RUBIES.each_key { |v| binaries["lib/farce/#{v}/libfarce_core.so"] = first }
      build_platform_gem(AARCH64_PLATFORM, binaries,
                         "aarch64 Linux (glibc) and Ruby #{AARCH64_RUBIES.keys.join(', ')}; other Rubies need the source gem")
    end
  end

  desc "Install the #{AARCH64_PLATFORM} gem in each arm64 root (qemu-user, no Go) and run Farce.run and the test subset"
  task :check_aarch64 do
    sh "bash", File.join(ROOT, ".ci", "arm64-gem-check"), "pkg/farce-#{gem_version}-#{AARCH64_PLATFORM}.gem"
  end
end
