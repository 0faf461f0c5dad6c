#!/bin/bash
# cross-compile.sh - vet and compile the tests of the portable Go packages for
# every system farce claims, from this (Linux) machine. The kqueue and IOCP
# drivers cannot run here; this proves at least that they and their tests
# build and pass vet. Prints one line per package and GOOS/GOARCH.
#
# linux/arm64 (the aarch64-linux gem's) also RUNS: when qemu-aarch64 is
# registered with binfmt_misc (.ci/arm64-setup does it), the Go tests of the
# drivers, the scheduler and the exported core (cgo, with the cross compiler
# aarch64-linux-gnu-gcc and its libc under QEMU_LD_PREFIX) run emulated; else
# the script says why they do not.
set -euo pipefail
cd "$(dirname "$0")/.."

# GOOS/GOARCH pairs: every GOOS a driver claims on amd64, and the arm64 of
# Linux (the aarch64 gem) and macOS (Apple silicon).
TARGETS=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64 netbsd/amd64 openbsd/amd64 windows/amd64)
PKGS=(./internal/driver/ ./internal/sched/)

# Every combination is tried (a failure does not hide the others); the
# script fails at the end if any failed.
failed=0
for pkg in "${PKGS[@]}"; do
  for target in "${TARGETS[@]}"; do
    goos=${target%/*} goarch=${target#*/}
    if out=$(GOOS=$goos GOARCH=$goarch go vet "$pkg" 2>&1 && GOOS=$goos GOARCH=$goarch go test -c -o /dev/null "$pkg" 2>&1); then
      echo "cross-compile: $pkg GOOS=$goos GOARCH=$goarch: vet ok, test build ok"
    else
      echo "cross-compile: $pkg GOOS=$goos GOARCH=$goarch: FAILED"
      printf '%s\n' "$out" | sed 's/^/    /'
      failed=1
    fi
  done
done

# linux/arm64, run under qemu-user.
if ! grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null; then
  echo "cross-compile: linux/arm64 tests NOT RUN: qemu-aarch64 is not registered with binfmt_misc (run .ci/arm64-setup)"
elif ! command -v aarch64-linux-gnu-gcc >/dev/null || [ ! -d /usr/aarch64-linux-gnu/lib ]; then
  echo "cross-compile: linux/arm64 tests NOT RUN: no aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu)"
else
  if out=$(GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc QEMU_LD_PREFIX=/usr/aarch64-linux-gnu \
      go test -count=1 "${PKGS[@]}" ./ext/farce/core/ 2>&1); then
    printf '%s\n' "$out" | sed 's/^/cross-compile: linux\/arm64 (qemu-user): /'
  else
    echo "cross-compile: linux/arm64 tests under qemu-user: FAILED"
    printf '%s\n' "$out" | sed 's/^/    /'
    failed=1
  fi
fi
# windows/amd64: the Go core as a DLL (-buildmode=c-shared, cgo), built and
# vetted with the UCRT mingw-w64 compiler of the sid chroot (.ci/sid-setup
# --wine puts it there); Debian 12's mingw-w64 only targets msvcrt.
SID_ROOT=${SID_ROOT:-/opt/rubies/sid}
WINDOWS_CC=x86_64-w64-mingw32ucrt-gcc
if [ ! -x "$SID_ROOT/usr/bin/$WINDOWS_CC" ]; then
  echo "cross-compile: ./ext/farce/core GOOS=windows (c-shared DLL) NOT BUILT: no $WINDOWS_CC in $SID_ROOT (run .ci/sid-setup --wine)"
elif [ "$(id -u)" != 0 ]; then
  echo "cross-compile: ./ext/farce/core GOOS=windows (c-shared DLL) NOT BUILT: .ci/sid-run needs root"
else
  # sid-run binds the current directory, so the output goes into the tree.
  mkdir -p tmp
  if out=$(SID_ROOT=$SID_ROOT "$(dirname "$0")/sid-run" env CGO_ENABLED=1 GOOS=windows GOARCH=amd64 CC=$WINDOWS_CC \
      sh -c 'go vet ./ext/farce/core && go build -buildvcs=false -trimpath -buildmode=c-shared -o tmp/cross-farce_core.dll ./ext/farce/core' 2>&1); then
    echo "cross-compile: ./ext/farce/core GOOS=windows GOARCH=amd64 (c-shared DLL, $WINDOWS_CC): vet ok, build ok"
  else
    echo "cross-compile: ./ext/farce/core GOOS=windows GOARCH=amd64 (c-shared DLL): FAILED"
    printf '%s\n' "$out" | sed 's/^/    /'
    failed=1
  fi
  rm -f tmp/cross-farce_core.dll tmp/cross-farce_core.h
fi
exit "$failed"
