# frozen_string_literal: true

# The platform gems built on this machine for another one (aarch64-linux in
# rakelib/gem_aarch64.rake, x64-mingw-ucrt in rakelib/windows_gem.rake)
# carry the same Ruby files and differ only in their binaries and what the
# description says they are for.
require "fileutils"
require "rubygems/package"

# Builds pkg/farce-VERSION-PLATFORM.gem: the source gem's files less what
# compiles the extension (ext/, the Go module, vendor/), plus binaries, a Hash
# of each binary's path in the gem to the file built for it. The description
# ends "This gem is precompiled for <precompiled_for>" in place of the source
# gem's words about compiling. The package is assembled in tmp/gem-PLATFORM/:
# the checkout's lib/farce/X.Y/ hold this machine's own builds.
def build_platform_gem(platform, binaries, precompiled_for)
  stage = File.join(ROOT, "tmp", "gem-#{platform}")
  FileUtils.rm_rf(stage)
  # The gemspec lists its files relative to the current directory; RubyGems
  # caches what it loads, so this copy is changed, not the cached one.
  spec = Dir.chdir(ROOT) { Gem::Specification.load("farce.gemspec") }.dup
  spec.platform = Gem::Platform.new(platform)
  spec.extensions = []
  spec.files = spec.files.reject { |f| f.start_with?("ext/", "internal/", "vendor/") || f.start_with?("go.") }
  spec.description = spec.description.sub(/This\s+source gem.*\z/m, "This gem is precompiled for #{precompiled_for}.\n")
  copies = spec.files.to_h { |f| [f, File.join(ROOT, f)] }.merge(binaries)
  copies.each do |in_gem, from|
    dest = File.join(stage, in_gem)
    FileUtils.mkdir_p(File.dirname(dest))
    FileUtils.cp(from, dest)
  end
  spec.files += binaries.keys
  # Gem::Package.build reads the files relative to the current directory.
  file = Dir.chdir(stage) { Gem::Package.build(spec) }
  FileUtils.mkdir_p(File.join(ROOT, "pkg"))
  FileUtils.mv(File.join(stage, file), File.join(ROOT, "pkg", file))
  puts "built pkg/#{file}"
end
