# frozen_string_literal: false

# Loaded with `ruby --disable-gems -r` before ext/farce/extconf.rb when
# `rake gem:native PLATFORM=aarch64-linux` builds the extension for another
# architecture (the way rake-compiler cross-compiles): the host's mkmf then
# writes a Makefile from the TARGET Ruby's rbconfig.rb instead of its own.
#
#   FARCE_CROSS_RBCONFIG  the target's rbconfig.rb, inside an arm64 Debian
#                         root made by .ci/arm64-setup. Debian's rbconfig.rb
#                         derives its prefix from its own path, so the
#                         headers and libdir it names are the root's, and its
#                         CC is the cross compiler (aarch64-linux-gnu-gcc).
#   FARCE_CROSS_SYSROOT   that root: mkmf's link checks (have_func) link a
#                         test program against the root's libruby, whose own
#                         libraries (libgmp, libz...) ld finds there.
#
# The host Ruby must not run anything it builds (mkmf's try_run raises when
# CROSS_COMPILING is set), and RUBY_VERSION/RUBY_PLATFORM say the target's, as
# the target's rbconfig.rb insists on its own version.
target = ENV.fetch("FARCE_CROSS_RBCONFIG")
sysroot = ENV.fetch("FARCE_CROSS_SYSROOT")
source = File.read(target)
version = source[/raise "ruby lib version \(([\d.]+)\)/, 1] or abort "#{target}: no Ruby version in it"
arch = source[/CONFIG\["arch"\] = "([^"]+)"/, 1] or abort "#{target}: no arch in it"

# What `require "rbconfig"` would load: marked as loaded, so that mkmf keeps
# the target's RbConfig.
host_rbconfig = $LOAD_PATH.map { |dir| File.join(dir, "rbconfig.rb") }.find { |f| File.file?(f) }
abort "cross_rbconfig.rb: run with --disable-gems (RbConfig is already the host's)" if defined?(RbConfig)

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

libdirs = %w[usr/lib lib].map { |d| File.join(sysroot, d, RbConfig::CONFIG["arch"]) }
# Only mkmf's test programs need these (they land in the Makefile's LDFLAGS
# too, where they change nothing): the root's libruby depends on libraries,
# and a glibc, the cross toolchain does not have. The extension itself is
# linked against neither (`make LIBRUBYARG_SHARED=`).
rpath_link = libdirs.map { |d| "-Wl,-rpath-link,#{d}" }.join(" ")
RbConfig::MAKEFILE_CONFIG["LDFLAGS"] = "#{RbConfig::MAKEFILE_CONFIG['LDFLAGS']} #{rpath_link} -Wl,--allow-shlib-undefined"
RbConfig::CONFIG["LDFLAGS"] = "#{RbConfig::CONFIG['LDFLAGS']} #{rpath_link} -Wl,--allow-shlib-undefined"
# Ruby 3.4's rbconfig.rb has LIBPATHFLAG "-L%s", its own mkmf adding the
# space; older mkmf (the host's) concatenates, and expects " -L%s".
[RbConfig::MAKEFILE_CONFIG, RbConfig::CONFIG].each do |config|
  %w[LIBPATHFLAG RPATHFLAG].each do |key|
    value = config[key].to_s
    config[key] = " #{value}" unless value.empty? || value.start_with?(" ")
  end
end
warn "cross_rbconfig: building for Ruby #{RUBY_VERSION} #{RUBY_PLATFORM} with #{RbConfig::CONFIG['CC']} " \
     "(headers #{RbConfig::CONFIG['rubyhdrdir']})"
