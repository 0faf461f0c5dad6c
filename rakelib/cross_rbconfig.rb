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
# The host Ruby must not run anything it builds, and RUBY_VERSION and
# RUBY_PLATFORM say the target's (target_rbconfig.rb, shared with the
# Windows build's windows_mkmf.rb).
target = ENV.fetch("FARCE_CROSS_RBCONFIG")
sysroot = ENV.fetch("FARCE_CROSS_SYSROOT")
require_relative "target_rbconfig"
load_target_rbconfig(target, "cross_rbconfig.rb")

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
