# frozen_string_literal: true

# Builds both halves of farce: the Ruby extension (the C files in this
# folder) with mkmf, and the Go core (core/export.go over internal/, with
# core/'s C, which only cgo compiles) as a -buildmode=c-shared library
# installed next to it. The extension dlopen's the core on first use (the
# first Farce::Scheduler.new, or a selector's first wait), never at require
# time.
require "mkmf"
require "tmpdir"

ROOT = File.expand_path("../..", __dir__)
# The Go version go.mod names is the one needed (an older go would try to
# download a newer toolchain, which an offline install cannot).
GO_MINIMUM = File.read(File.join(ROOT, "go.mod"))[/^go (\d+\.\d+)/, 1].split(".").map(&:to_i).freeze
# The source gem carries its Go modules in vendor/ (rake gem:source), so it
# builds offline; a git checkout reads them from the module cache.
GO_MOD_FLAG = File.exist?(File.join(ROOT, "vendor", "modules.txt")) ? "-mod=vendor" : "-mod=mod"

# Windows (x64-mingw-ucrt, RubyInstaller's kind of Ruby): the Go core is a
# DLL built with the Ruby's own C compiler, and the extension LoadLibrary's
# it (core_loader_windows.c) instead of dlopen'ing a .so.
WINDOWS = RbConfig::CONFIG["host_os"].match?(/mingw/)
CORE_LIBRARY = WINDOWS ? "farce_core.dll" : "libfarce_core.so"

# The environment of the Go core's build: cgo, and on Windows the target and
# the compiler (also when cross-compiling from Linux, rakelib/windows_build.rake).
def go_core_env
  return { "CGO_ENABLED" => "1" } unless WINDOWS

  { "CGO_ENABLED" => "1", "GOOS" => "windows", "GOARCH" => "amd64", "CC" => RbConfig::CONFIG["CC"].split.first }
end

# The one `go build` of the Go core: the Makefile's and the trial build's.
def go_core_build_args(output)
  ["build", GO_MOD_FLAG, "-buildvcs=false", "-trimpath", "-buildmode=c-shared", "-o", output, "./ext/farce/core"]
end

def abort_build(message)
  warn "\n*** farce: #{message}\n\n"
  exit 1
end

# ---- the fallback: install without the native core -------------------------
# When the native core cannot be built here (no Go, an unsupported OS, a
# build error), the gem still installs and runs on farce's pure-Ruby loop
# (lib/farce/ruby_loop.rb). This says so once, installs farce/native_status.rb
# (read by lib/farce/native.rb: Scheduler#fallback_reason repeats the reason)
# and writes a Makefile that builds nothing. FARCE_REQUIRE_NATIVE=1 makes it a
# failure instead, for images that must never run the slow path.
def skip_native(reason)
  value = ENV.fetch("FARCE_REQUIRE_NATIVE", "")
  if !value.empty? && value != "0"
    abort_build("cannot build farce's native core: #{reason}\n" \
                "*** FARCE_REQUIRE_NATIVE is set, so the pure-Ruby loop is not installed in its place.")
  end
  status = "farce's native core was not built when the gem was installed: #{reason}"
  message = <<~TEXT

    *** farce: #{status}
    *** farce will run on its pure-Ruby loop (Farce::Scheduler#backend is :ruby): every hook works,
    *** several times slower than the native core. To get the native core, fix the above and
    *** reinstall; set FARCE_REQUIRE_NATIVE=1 to make this a failure instead.

  TEXT
  warn message # into the build log (gem_make.out)
  # `gem install` shows the build's output only when it fails: say it on the
  # terminal too, when there is one. (At run time farce warns once more.)
  begin
    File.open("/dev/tty", "w") { |tty| tty.write(message) }
  rescue SystemCallError
    nil
  end
  File.write("native_status.rb", <<~RUBY)
    # frozen_string_literal: true

    # Written by farce's ext/farce/extconf.rb: why this installation has no native core.
    module Farce
      module Native
        BUILD_SKIPPED = #{status.dump}
      end
    end
  RUBY
  File.write("Makefile", <<~MAKE)
    # farce: no native core (see native_status.rb); installs only that file.
    SHELL = /bin/sh
    sitearchdir = #{RbConfig::CONFIG['sitearchdir']}
    all:
    \t@:
    install:
    \tmkdir -p "$(DESTDIR)$(sitearchdir)/farce"
    \tcp native_status.rb "$(DESTDIR)$(sitearchdir)/farce/native_status.rb"
    clean:
    \t@:
    .PHONY: all install clean
  MAKE
  exit 0
end

# Builds the Go core once into a scratch directory, so that a build error
# becomes the fallback above rather than a failed `make` (Go's build cache
# makes the Makefile's own build of it quick afterwards).
def check_go_core_builds(go)
  Dir.mktmpdir("farce-core") do |dir|
    output = IO.popen(go_core_env, [go, *go_core_build_args(File.join(dir, CORE_LIBRARY))],
                      chdir: ROOT, err: %i[child out], &:read)
    return if $?.success?

    skip_native("the Go core failed to build with #{go}:\n#{output.lines.last(15).join.rstrip}")
  end
end
# ---- end of the fallback ----------------------------------------------------

# The Go toolchain: $FARCE_GO, then `go` on PATH, then /usr/local/go.
def find_go
  candidates = [ENV["FARCE_GO"], *ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, "go") },
                "/usr/local/go/bin/go"].compact.reject(&:empty?)
  go = candidates.find { |path| File.file?(path) && File.executable?(path) }
  unless go
    skip_native("no Go toolchain found. farce's core is written in Go and needs Go >= #{GO_MINIMUM.join('.')} " \
                "at build time. Install it (https://go.dev/dl/ or your package manager) and put `go` on PATH, " \
                "or point FARCE_GO at the go binary, e.g. `FARCE_GO=/usr/local/go/bin/go gem install farce`.")
  end
  version = `#{go} env GOVERSION 2>/dev/null`.strip
  numbers = version[/\d+\.\d+/]&.split(".")&.map(&:to_i)
  if numbers.nil? || (numbers <=> GO_MINIMUM).negative?
    skip_native("#{go} reports #{version.inspect}; farce needs Go >= #{GO_MINIMUM.join('.')}. " \
                "Set FARCE_GO to a newer go binary.")
  end
  go
end

case RbConfig::CONFIG["host_os"]
when /linux/, /mingw/ then nil
when /mswin|cygwin/
  skip_native("on Windows the native core is built only for the mingw-w64 UCRT Rubies (RubyInstaller's x64-mingw-ucrt), " \
              "not for #{RbConfig::CONFIG['host_os']}")
else
  # The Go core has kqueue for macOS and the BSDs, but the extension has only
  # been built and tested on Linux: FARCE_TRY_NATIVE=1 tries it anyway.
  unless ENV["FARCE_TRY_NATIVE"] == "1"
    skip_native("the native core is built only on Linux so far (this is #{RbConfig::CONFIG['host_os']}; " \
                "FARCE_TRY_NATIVE=1 tries it anyway)")
  end
end

go = find_go
check_go_core_builds(go)
unless WINDOWS # no fork, no dlopen on Windows
  abort_build("pthread_atfork is missing") unless have_func("pthread_atfork", "pthread.h")
  have_library("dl", "dlopen")
end
have_func("rb_io_buffer_get_bytes_for_writing", "ruby/io/buffer.h") ||
  abort_build("this Ruby lacks rb_io_buffer_get_bytes_for_writing: farce needs Ruby >= 3.1")
# IO::Buffer's lock: the headers' RUBY_IO_BUFFER_VERSION did not move when
# Ruby 4.1 (ruby/ruby#18429) replaced the one lock flag with a lock count, so
# the Ruby at hand is asked what it has. A count comes with
# rb_io_buffer_new_locked; the flag is RB_IO_BUFFER_LOCKED, read through
# rb_io_buffer_get_bytes where there is one (3.2+).
counted_locks = have_func("rb_io_buffer_new_locked", "ruby/io/buffer.h")
lock_flag = have_const("RB_IO_BUFFER_LOCKED", "ruby/io/buffer.h")
have_func("rb_io_buffer_get_bytes", "ruby/io/buffer.h")
if counted_locks == lock_flag
  abort_build("this Ruby's IO::Buffer (#{RUBY_DESCRIPTION}) has #{counted_locks ? 'both' : 'neither'} " \
              "rb_io_buffer_new_locked (counted locks) and #{counted_locks ? '' : 'nor '}RB_IO_BUFFER_LOCKED " \
              "(one lock flag): farce knows how to hold a buffer with exactly one of them. Please report this Ruby.")
end
have_func("rb_fiber_raise", "ruby.h")
have_func("rb_io_descriptor", "ruby/io.h") # 3.1+: Ruby 3.3 deprecates rb_io_t's fd field
$CFLAGS << " -std=gnu11 -Wall -Wno-unused-parameter"
# The C sources, one folder per layer (docs/architecture.md draws them,
# test/test_ext_layering.rb holds each folder to what it may include). An
# include names its folder from here ("loop/event_loop.h"), through the
# -I$(srcdir) mkmf always passes; make finds each source through VPATH, and
# every object is named by its source's basename in the build folder, so
# no two sources may share one (mkmf refuses the build if they do).
SOURCES = {
  "front_ends" => %w[extension.c fiber_scheduler.c io_event_selector.c],
  "hook_io" => %w[io_transfer.c io_transfer_v4.c caller_may_wait.c step_readiness.c step_socket.c step_completion.c step_positional.c
                  positional_io.c buffer_lock.c],
  "loop" => %w[event_loop.c wait_table.c fd_table.c inflight_ops.c stall.c],
  "core_access" => %w[core_door.c core_loader.c core_open.c core_signals.c core_copy.c core_info.c],
  "platforms" => []
}
# What differs by platform lives in files named for it, *_windows.c on
# Windows and *_unix.c elsewhere, behind one header that the shared files
# include (docs/architecture.md).
PLATFORM = WINDOWS ? "windows" : "unix"
SOURCES["hook_io"] += %W[steps_#{PLATFORM}.c step_pipe_#{PLATFORM}.c step_file_#{PLATFORM}.c process_wait_#{PLATFORM}.c]
SOURCES["hook_io"] += %w[step_terminal_unix.c] unless WINDOWS # a Windows console is a file's step there
SOURCES["loop"] += %W[fd_table_#{PLATFORM}.c stall_#{PLATFORM}.c]
SOURCES["core_access"] += %W[core_door_#{PLATFORM}.c]
if WINDOWS
  # No fork, so no private copies of the core and no fork generations; no
  # signal masks around its start; LoadLibrary in place of dlopen. Every call
  # into the Go core runs on a stack of its own (core_call_windows.c).
  SOURCES["core_access"] -= %w[core_loader.c core_open.c core_copy.c core_signals.c]
  SOURCES["core_access"] += %w[core_loader_windows.c core_call_windows.c]
  SOURCES["hook_io"] += %w[stream_offload_windows.c]
  SOURCES["platforms"] += %w[win32_compat.c]
  have_library("ws2_32") # the nonblocking socket calls of the io hooks
end
$srcs = SOURCES.values.flatten
$VPATH.concat(SOURCES.keys.map { |folder| "$(srcdir)/#{folder}" })
# mkmf makes every object depend on the headers of the top folder only
# ($(HDRS)); these are the ones a change to must rebuild the objects.
EXT_HEADERS = Dir.chdir(__dir__) { Dir["{#{SOURCES.keys.join(',')},core}/*.h"].sort }.freeze
create_makefile("farce/farce_ext")

File.open("Makefile", "a") do |makefile|
  makefile.puts <<~MAKE

    # ---- the Go core, built with the Go toolchain (added by extconf.rb) ----
    FARCE_GO = #{go}
    FARCE_ROOT = #{ROOT}
    FARCE_CORE = #{CORE_LIBRARY}
    .PHONY: $(FARCE_CORE) install-farce-core clean-farce-core
    all: $(FARCE_CORE)
    $(FARCE_CORE):
    \tcd $(FARCE_ROOT) && #{go_core_env.map { |k, v| "#{k}=#{v}" }.join(' ')} $(FARCE_GO) #{go_core_build_args('"$(CURDIR)/$(FARCE_CORE)"').join(' ')}
    install-so: install-farce-core
    install-farce-core: $(FARCE_CORE)
    \t$(MAKEDIRS) $(RUBYARCHDIR)
    \t$(INSTALL_PROG) $(FARCE_CORE) $(RUBYARCHDIR)
    clean: clean-farce-core
    $(OBJS): #{EXT_HEADERS.map { |h| "$(srcdir)/#{h}" }.join(' ')}
    clean-farce-core:
    \t-$(Q)$(RM) $(FARCE_CORE) #{File.basename(CORE_LIBRARY, '.*')}.h
  MAKE
end
