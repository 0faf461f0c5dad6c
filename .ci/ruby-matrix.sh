#!/bin/bash
# ruby-matrix.sh - build farce and run the whole test/ suite on Debian's Ruby
# 3.1 (the host) and on Ruby 3.3 and 3.4 (the Debian sid chroot, through
# ../shared/tools/sid-run). Every Ruby is tried (a failure does not hide the
# others); the script fails at the end if any build or test run failed.
#
#   .ci/ruby-matrix.sh            # 3.1 3.3 3.4
#   RUBIES="3.4" .ci/ruby-matrix.sh
#
# The chroot cannot reach the Go module proxy (no CA certificates there), so
# the host's module cache is bound into it (read from, never downloaded to).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
TOOLS=${FARCE_SHARED_TOOLS:-$ROOT/../shared/tools}
RUBIES=${RUBIES:-"3.1 3.3 3.4"}
SID_ROOT=${SID_ROOT:-/opt/rubies/sid}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
ALL_TESTS='Dir["test/test_*.rb"].sort.each { |f| require_relative File.join(Dir.pwd, f) }'
IO_EVENT_TESTS='Dir["test/io_event/test_*.rb"].sort.each { |f| require_relative File.join(Dir.pwd, f) }'

need_sid=0
for v in $RUBIES; do [ "$v" != 3.1 ] && need_sid=1; done
if [ "$need_sid" = 1 ] && [ ! -e "$SID_ROOT/.stamp-complete" ]; then
  echo "ruby-matrix: $SID_ROOT is not set up; running sid-ruby-setup"
  "$TOOLS/sid-ruby-setup" || { echo "ruby-matrix: sid-ruby-setup failed" >&2; exit 1; }
fi

go mod download || { echo "ruby-matrix: go mod download failed" >&2; exit 1; }
MODCACHE=$(go env GOMODCACHE)

# in_ruby VERSION CMD... : run CMD with that Ruby (host for 3.1, chroot otherwise)
in_ruby() {
  local v=$1; shift
  if [ "$v" = 3.1 ]; then
    "$@"
  else
    # sid-run binds MODCACHE at the same path, or under /host when the chroot has files there
    SID_RUBY=$v SID_BIND=$MODCACHE "$TOOLS/sid-run" sh -c '
      m=/host$0; [ -d "$m/cache" ] || m=$0
      export GOMODCACHE=$m GOPROXY=off GOFLAGS=-mod=mod
      shift; exec "$@"' "$MODCACHE" _ "$@"
  fi
}

failed=()
summary=()
for v in $RUBIES; do
  echo "==== Ruby $v: build"
  rm -f "tmp/build-$v/Makefile" # extconf.rb checks (have_func) run again for every build
  if ! in_ruby "$v" rake compile; then
    failed+=("$v:build"); summary+=("Ruby $v: BUILD FAILED"); continue
  fi
  echo "==== Ruby $v: test/"
  log=$(mktemp)
  timeout -s KILL "$TEST_TIMEOUT" bash -c "$(declare -f in_ruby); TOOLS='$TOOLS' MODCACHE='$MODCACHE' in_ruby '$v' ruby -Itest -e '$ALL_TESTS' -- -v" 2>&1 | tee "$log" \
    | grep -vE ' = [0-9.]+ s = \.$'  # keep skips (with their reasons), failures and the totals
  rc=${PIPESTATUS[0]}
  totals=$(grep -E '^[0-9]+ runs,' "$log" | tail -1)
  rm -f "$log"
  if [ "$rc" != 0 ] || [ -z "$totals" ]; then
    failed+=("$v:test"); summary+=("Ruby $v: FAILED (exit $rc) ${totals:-no totals}")
  else
    summary+=("Ruby $v: ok: $totals")
  fi
done

# Async on farce's io-event selector (test/io_event/): Ruby 3.3 in the chroot
# has Async, io-event and async-http. The file runs every test twice, with
# IO_EVENT_SELECTOR=Farce and with io-event's default selector (EPoll).
if [[ " $RUBIES " == *" 3.3 "* ]] && [[ ! " ${failed[*]} " == *" 3.3:build "* ]]; then
  echo "==== Ruby 3.3: test/io_event (IO_EVENT_SELECTOR=Farce and EPoll)"
  log=$(mktemp)
  timeout -s KILL "$TEST_TIMEOUT" bash -c "$(declare -f in_ruby); TOOLS='$TOOLS' MODCACHE='$MODCACHE' in_ruby 3.3 ruby -Ilib -Itest -e '$IO_EVENT_TESTS' -- -v" 2>&1 | tee "$log" \
    | grep -vE ' = [0-9.]+ s = \.$'
  rc=${PIPESTATUS[0]}
  totals=$(grep -E '^[0-9]+ runs,' "$log" | tail -1)
  rm -f "$log"
  if [ "$rc" != 0 ] || [ -z "$totals" ] || [[ "$totals" != *" 0 skips"* ]]; then
    failed+=("3.3:io_event"); summary+=("Ruby 3.3 io_event: FAILED (exit $rc) ${totals:-no totals}")
  else
    summary+=("Ruby 3.3 io_event: ok: $totals")
  fi
fi

echo "==== summary"
printf '%s\n' "${summary[@]}"
[ ${#failed[@]} -eq 0 ] || { echo "ruby-matrix: failed: ${failed[*]}" >&2; exit 1; }
echo "ruby-matrix: all Rubies passed"
