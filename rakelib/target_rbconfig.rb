# frozen_string_literal: false

# For the cross builds' preludes (cross_rbconfig.rb for aarch64-linux,
# windows_mkmf.rb for x64-mingw-ucrt), loaded with `ruby --disable-gems -r`
# before ext/farce/extconf.rb: makes the running Ruby take another Ruby's
# rbconfig.rb as its RbConfig, so that mkmf writes that Ruby's Makefile.
#
# The other rbconfig.rb refuses to load unless RUBY_VERSION is its own, and
# RUBY_PLATFORM and CROSS_COMPILING must say the target's (mkmf's try_run
# then refuses to run what it builds). Returns the target's version and arch.
def load_target_rbconfig(target, prelude)
  abort "#{prelude}: run with --disable-gems (RbConfig is already this Ruby's)" if defined?(RbConfig)

  source = File.read(target)
  version = source[/ruby lib version \(([\d.]+)\)/, 1] or abort "#{target}: no Ruby version in it"
  arch = source[/CONFIG\["arch"\] = "([^"]+)"/, 1] or abort "#{target}: no arch in it"
  # What `require "rbconfig"` would load: marked as loaded, so that mkmf keeps
  # the target's RbConfig.
  host_rbconfig = $LOAD_PATH.map { |dir| File.join(dir, "rbconfig.rb") }.find { |f| File.file?(f) }

  verbose = $VERBOSE
  $VERBOSE = nil # constants redefined on purpose
  Object.send(:remove_const, :RUBY_VERSION)
  Object.send(:remove_const, :RUBY_PLATFORM)
  Object.const_set(:RUBY_VERSION, version.freeze)
  Object.const_set(:RUBY_PLATFORM, arch.freeze)
  Object.const_set(:CROSS_COMPILING, arch.freeze)
  load target
  $LOADED_FEATURES << host_rbconfig if host_rbconfig
  $VERBOSE = verbose
  [version, arch]
end
