#!/bin/bash
# wine-tests.sh - run the internal/driver tests for windows (the IOCP driver)
# under wine from Debian sid (Debian 12's wine 8 cannot start Go 1.26
# binaries). Tests that wine cannot support skip themselves with a reason
# found at run time; any failure fails this script.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TOOLS=${FARCE_SHARED_TOOLS:-$ROOT/../shared/tools}

# Idempotent: only installs what is missing. Another process may be setting
# the chroot up at the same moment; retry a few times before giving up.
for try in 1 2 3 4 5; do
  if SID_WITH_WINE=1 "$TOOLS/sid-ruby-setup"; then break; fi
  [ "$try" = 5 ] && { echo "wine-tests: sid-ruby-setup failed" >&2; exit 1; }
  echo "wine-tests: sid-ruby-setup failed (try $try), retrying in 60s" >&2
  sleep 60
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GOOS=windows GOARCH=amd64 go test -c -o "$work/driver_test.exe" ./internal/driver/
cd "$work"
# wine prints fixme/err lines from its own components on stderr; keep them
# out of the test log but on disk for inspection.
set +e
timeout 600 "$TOOLS/sid-run" wine64 ./driver_test.exe -test.v -test.timeout 300s 2>"$work/wine-stderr.log" | tee "$work/test.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  echo "wine-tests: driver_test.exe exited $rc; wine stderr tail:" >&2
  tail -20 "$work/wine-stderr.log" >&2
  exit 1
fi
grep -q '^PASS$' "$work/test.log" || { echo "wine-tests: no PASS line" >&2; exit 1; }
echo "wine-tests: windows driver tests passed under wine"
