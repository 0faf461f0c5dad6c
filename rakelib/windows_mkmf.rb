# frozen_string_literal: false

# Loaded with `ruby --disable-gems -r` before ext/farce/extconf.rb (by
# rakelib/windows_build.rake, in the sid chroot) to build the extension for a
# Windows Ruby (x64-mingw-ucrt) on Linux, the way rake-compiler
# cross-compiles: this Linux Ruby then reads the Windows Ruby's rbconfig.rb
# and runs the Windows Ruby's own mkmf.rb (a newer mkmf than this Ruby's may
# not understand the other's rbconfig), so the Makefile is the one the
# Windows Ruby would write.
#
#   FARCE_WINDOWS_RUBY  the Windows Ruby's folder (holding bin/ruby.exe,
#                       include/ and lib/ruby/X.Y.0/x64-mingw-ucrt/)
#
# A cross-built Windows Ruby names its compiler x86_64-w64-mingw32-gcc; the
# UCRT toolchain installs x86_64-w64-mingw32ucrt-gcc (and -ar, -windres...),
# so the tools are renamed to those.
root = ENV.fetch("FARCE_WINDOWS_RUBY")
target = Dir[File.join(root, "lib", "ruby", "*", "*-mingw*", "rbconfig.rb")].first \
  or abort "windows_mkmf.rb: no lib/ruby/X.Y.0/*-mingw*/rbconfig.rb under #{root}"
host_mkmf = $LOAD_PATH.map { |dir| File.join(dir, "mkmf.rb") }.find { |f| File.file?(f) }

# Libraries that branch on the platform when loaded must see this one first.
require "resolv"
require_relative "target_rbconfig"
load_target_rbconfig(target, "windows_mkmf.rb")
# The Windows mkmf builds paths with File::ALT_SEPARATOR in mind.
verbose = $VERBOSE
$VERBOSE = nil # a constant redefined on purpose
File.send(:remove_const, :ALT_SEPARATOR)
File.const_set(:ALT_SEPARATOR, "\\")
$VERBOSE = verbose

[RbConfig::MAKEFILE_CONFIG, RbConfig::CONFIG].each do |config|
  config.each_key do |key|
    value = config[key]
    next unless value.is_a?(String) && value.include?("x86_64-w64-mingw32-")

    config[key] = value.gsub("x86_64-w64-mingw32-", "x86_64-w64-mingw32ucrt-")
  end
end

# The Windows Ruby's mkmf, in place of this Ruby's.
$LOADED_FEATURES << host_mkmf if host_mkmf
require File.join(File.dirname(target), "..", "mkmf.rb")
warn "windows_mkmf: building for Ruby #{RUBY_VERSION} #{RUBY_PLATFORM} with #{RbConfig::CONFIG['CC']} " \
     "(headers #{RbConfig::CONFIG['rubyhdrdir']})"
