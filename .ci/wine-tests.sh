#!/bin/bash
# wine-tests.sh - run the internal/driver tests for windows (the IOCP driver)
# under wine from Debian sid (Debian 12's wine 8 cannot start Go 1.26
# binaries), in the chroot of .ci/sid-setup. Tests that wine cannot support
# skip themselves with a reason found at run time; any failure fails this
# script. `rake test:wine` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
CI=$(pwd -P)/.ci

# Idempotent: only installs what is missing. Another process may be using apt
# in the chroot at the same moment (its lock); retry a few times.
for try in 1 2 3 4 5; do
  if "$CI/sid-setup" --wine; then break; fi
  [ "$try" = 5 ] && { echo "wine-tests: sid-setup --wine failed" >&2; exit 1; }
  echo "wine-tests: sid-setup --wine failed (try $try), retrying in 60s" >&2
  sleep 60
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GOOS=windows GOARCH=amd64 go test -c -o "$work/driver_test.exe" ./internal/driver/
cd "$work"
# wine prints fixme/err lines from its own components on stderr; keep them
# out of the test log but on disk for inspection.
set +e
timeout 600 "$CI/sid-run" wine64 ./driver_test.exe -test.v -test.timeout 300s 2>"$work/wine-stderr.log" | tee "$work/test.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  echo "wine-tests: driver_test.exe exited $rc; wine stderr tail:" >&2
  tail -20 "$work/wine-stderr.log" >&2
  exit 1
fi
grep -q '^PASS$' "$work/test.log" || { echo "wine-tests: no PASS line" >&2; exit 1; }
echo "wine-tests: windows driver tests passed under wine"
