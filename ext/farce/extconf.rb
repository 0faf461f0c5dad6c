# frozen_string_literal: true

# Builds both halves of farce: the Ruby extension (the C files in this
# folder) with mkmf, and the Go core (core/export.go over internal/, with
# core/'s C, which only cgo compiles) as a -buildmode=c-shared library
# installed next to it. The extension dlopen's the core on first use (the
# first Farce::Scheduler.new, or a selector's first wait), never at require
# time.
require "mkmf"

GO_MINIMUM = [1, 24].freeze
ROOT = File.expand_path("../..", __dir__)

def abort_build(message)
  warn "\n*** farce: #{message}\n\n"
  exit 1
end

# The Go toolchain: $FARCE_GO, then `go` on PATH, then /usr/local/go.
def find_go
  candidates = [ENV["FARCE_GO"], *ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, "go") },
                "/usr/local/go/bin/go"].compact.reject(&:empty?)
  go = candidates.find { |path| File.file?(path) && File.executable?(path) }
  unless go
    abort_build("no Go toolchain found. farce's core is written in Go and needs Go >= #{GO_MINIMUM.join('.')} " \
                "at build time. Install it (https://go.dev/dl/ or your package manager) and put `go` on PATH, " \
                "or point FARCE_GO at the go binary, e.g. `FARCE_GO=/usr/local/go/bin/go gem install farce`.")
  end
  version = `#{go} env GOVERSION 2>/dev/null`.strip
  numbers = version[/\d+\.\d+/]&.split(".")&.map(&:to_i)
  if numbers.nil? || (numbers <=> GO_MINIMUM).negative?
    abort_build("#{go} reports #{version.inspect}; farce needs Go >= #{GO_MINIMUM.join('.')}. " \
                "Set FARCE_GO to a newer go binary.")
  end
  go
end

case RbConfig::CONFIG["host_os"]
when /linux/ then nil
when /darwin|bsd/
  warn "farce: macOS and the BSDs use the kqueue driver; you need Go and Xcode command line tools (cc)."
when /mingw|mswin|cygwin/
  abort_build("Windows is not supported by the Ruby extension yet (the IOCP driver exists in Go, the extension is POSIX-only).")
end

go = find_go
abort_build("pthread_atfork is missing") unless have_func("pthread_atfork", "pthread.h")
have_library("dl", "dlopen")
have_func("rb_io_buffer_get_bytes_for_writing", "ruby/io/buffer.h") ||
  abort_build("this Ruby lacks rb_io_buffer_get_bytes_for_writing: farce needs Ruby >= 3.1")
have_func("rb_fiber_raise", "ruby.h")
have_func("rb_io_descriptor", "ruby/io.h") # 3.1+: Ruby 3.3 deprecates rb_io_t's fd field
$CFLAGS << " -std=gnu11 -Wall -Wno-unused-parameter"
$srcs = %w[extension.c fiber_scheduler.c io_event_selector.c loop_core.c wait_table.c io_transfer.c
           process_wait.c fd_table.c positional_io.c core_calls.c core_loader.c]
create_makefile("farce/farce_shim")

File.open("Makefile", "a") do |makefile|
  makefile.puts <<~MAKE

    # ---- the Go core, built with the Go toolchain (added by extconf.rb) ----
    FARCE_GO = #{go}
    FARCE_ROOT = #{ROOT}
    FARCE_CORE = libfarce_core.so
    .PHONY: $(FARCE_CORE) install-farce-core clean-farce-core
    all: $(FARCE_CORE)
    $(FARCE_CORE):
    \tcd $(FARCE_ROOT) && CGO_ENABLED=1 GOFLAGS="$${GOFLAGS:--mod=mod}" $(FARCE_GO) build -trimpath -buildmode=c-shared -o "$(CURDIR)/$(FARCE_CORE)" ./ext/farce/core
    install-so: install-farce-core
    install-farce-core: $(FARCE_CORE)
    \t$(MAKEDIRS) $(RUBYARCHDIR)
    \t$(INSTALL_PROG) $(FARCE_CORE) $(RUBYARCHDIR)
    clean: clean-farce-core
    clean-farce-core:
    \t-$(Q)$(RM) $(FARCE_CORE) libfarce_core.h
  MAKE
end
