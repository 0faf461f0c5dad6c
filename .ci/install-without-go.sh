#!/usr/bin/env bash
# install-without-go.sh - `gem install farce` on a machine state without Go:
# the install succeeds, says why the native core was not built, and farce runs
# on its pure-Ruby loop (backend :ruby); with FARCE_REQUIRE_NATIVE=1 the
# install fails, naming what is missing.
#
# Go is hidden, not uninstalled: the script re-runs itself in a private mount
# namespace (unshare -m, needs root as the rest of CI) where every Go
# toolchain directory is covered by an empty tmpfs and PATH is /usr/bin:/bin.
# The gem is built from this checkout and installed into an empty GEM_HOME.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${FARCE_GO_HIDDEN:-}" ]; then
  exec unshare -m env FARCE_GO_HIDDEN=1 bash "$0" "$@"
fi
for d in /usr/local/go /usr/lib/go /usr/lib/go-*; do
  [ -d "$d" ] && mount -t tmpfs none "$d"
done
export PATH=/usr/bin:/bin
unset FARCE_GO GOROOT
if command -v go >/dev/null; then
  echo "install-without-go: go is still reachable at $(command -v go)" >&2
  exit 1
fi

work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; echo "work: $work"
fail() { echo "install-without-go: FAILED: $*" >&2; exit 1; }

echo "==== gem build"
gem build farce.gemspec --output "$work/farce.gem" >/dev/null

echo "==== gem install without Go"
if ! env -u FARCE_REQUIRE_NATIVE GEM_HOME="$work/gems" gem install --local --no-document "$work/farce.gem" \
    >"$work/install.log" 2>&1; then
  cat "$work/install.log"; fail "gem install failed without Go"
fi
# the message, once (gem install shows the build's output only on failure:
# the extension's build log holds it)
log=$(find "$work/gems/extensions" -name gem_make.out | head -1)
[ -n "$log" ] || fail "no gem_make.out"
grep -q "native core was not built when the gem was installed: no Go toolchain found" "$log" || { cat "$log"; fail "no message saying why"; }
[ "$(grep -c "farce will run on its pure-Ruby loop" "$log")" = 1 ] || { cat "$log"; fail "the message is not said exactly once"; }
grep -B1 -A3 "native core was not built" "$log"

echo "==== farce runs on the Ruby loop"
out=$(cd "$work" && env -u FARCE_BACKEND -u FARCE_REQUIRE_NATIVE GEM_HOME="$work/gems" ruby -e '
  require "farce"
  p Farce.run { Farce::Scheduler.new.backend }
  p Farce.run { r, w = IO.pipe; Fiber.schedule { sleep 0.01; w.write("ok") }; [Fiber.scheduler.backend, r.read(2)] }
  puts Farce::Scheduler.new.fallback_reason
  puts Gem.loaded_specs["farce"].full_gem_path')
echo "$out"
[ "$(echo "$out" | sed -n 1p)" = ":ruby" ] || fail "Farce::Scheduler.new.backend is not :ruby"
[ "$(echo "$out" | sed -n 2p)" = '[:ruby, "ok"]' ] || fail "a fiber did not run on the Ruby loop"
echo "$out" | sed -n 3p | grep -q "no Go toolchain found" || fail "fallback_reason does not say why"
echo "$out" | sed -n 4p | grep -q "^$work/gems" || fail "farce was not loaded from the installed gem"

echo "==== FARCE_REQUIRE_NATIVE=1 at run time refuses the Ruby loop"
if out=$(cd "$work" && env -u FARCE_BACKEND FARCE_REQUIRE_NATIVE=1 GEM_HOME="$work/gems" ruby -e 'require "farce"; Farce::Scheduler.new' 2>&1); then
  fail "Farce::Scheduler.new succeeded with FARCE_REQUIRE_NATIVE=1"
fi
echo "$out" | grep -q "Farce::Error" || { echo "$out"; fail "not a Farce::Error"; }
echo "$out" | grep -q "FARCE_REQUIRE_NATIVE" || { echo "$out"; fail "the error does not name FARCE_REQUIRE_NATIVE"; }
echo "$out" | head -2

echo "==== gem install with FARCE_REQUIRE_NATIVE=1 fails, naming what is missing"
if FARCE_REQUIRE_NATIVE=1 GEM_HOME="$work/gems2" gem install --local --no-document "$work/farce.gem" >"$work/install2.log" 2>&1; then
  cat "$work/install2.log"; fail "gem install succeeded with FARCE_REQUIRE_NATIVE=1 and no Go"
fi
grep -q "no Go toolchain found" "$work/install2.log" || { cat "$work/install2.log"; fail "the failure does not name the missing Go"; }
grep -m1 -A1 "cannot build farce's native core" "$work/install2.log"

echo "==== a Go core that fails to build: the install succeeds on the Ruby loop and shows the error"
mkdir -p "$work/fakego"
cat >"$work/fakego/go" <<'GO'
#!/bin/sh
[ "$1" = env ] && { echo go1.26.0; exit 0; }
echo "export.go:1:1: a build error made up by install-without-go.sh" >&2
exit 1
GO
chmod +x "$work/fakego/go"
if ! PATH="$work/fakego:$PATH" GEM_HOME="$work/gems3" gem install --local --no-document "$work/farce.gem" >"$work/install3.log" 2>&1; then
  cat "$work/install3.log"; fail "gem install failed when the Go core failed to build"
fi
out=$(cd "$work" && env -u FARCE_BACKEND GEM_HOME="$work/gems3" ruby -e 'require "farce"; s = Farce::Scheduler.new; p s.backend; puts s.fallback_reason' 2>/dev/null)
echo "$out" | head -3
[ "$(echo "$out" | sed -n 1p)" = ":ruby" ] || fail "not on the Ruby loop after a failed build"
echo "$out" | grep -q "a build error made up by install-without-go.sh" || fail "fallback_reason does not show the build error"

echo "install-without-go: ok"
