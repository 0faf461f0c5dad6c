#!/bin/bash
# cross-compile.sh - vet and compile the tests of the portable Go packages for
# every system farce claims, from this (Linux) machine. The kqueue and IOCP
# drivers cannot run here; this proves at least that they and their tests
# build and pass vet. Prints one line per package and GOOS.
set -euo pipefail
cd "$(dirname "$0")/.."

GOOSES=(linux darwin freebsd netbsd openbsd windows)
PKGS=(./internal/driver/ ./internal/sched/)

# Every combination is tried (a failure does not hide the others); the
# script fails at the end if any failed.
failed=0
for pkg in "${PKGS[@]}"; do
  for goos in "${GOOSES[@]}"; do
    if out=$(GOOS=$goos go vet "$pkg" 2>&1 && GOOS=$goos go test -c -o /dev/null "$pkg" 2>&1); then
      echo "cross-compile: $pkg GOOS=$goos: vet ok, test build ok"
    else
      echo "cross-compile: $pkg GOOS=$goos: FAILED"
      printf '%s\n' "$out" | sed 's/^/    /'
      failed=1
    fi
  done
done
exit "$failed"
