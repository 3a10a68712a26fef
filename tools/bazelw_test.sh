#!/usr/bin/env bash
# Checks ./bazelw's bootstrap with fake dpkg-query / apt-get / id on PATH:
# it installs what is missing once, does nothing on a second run, and as
# non-root exits 2 naming the missing package without touching apt.
set -euo pipefail

bazelw="$(pwd)/bazelw"
fake_bin="$TEST_TMPDIR/bin"
state="$TEST_TMPDIR/state"
mkdir -p "$fake_bin" "$state"

# dpkg-query: every package is installed except those listed in $state/missing.
cat > "$fake_bin/dpkg-query" <<'FAKE'
#!/usr/bin/env bash
package="${!#}"
if grep -qx "$package" "$STATE/missing" 2>/dev/null; then exit 1; fi
printf 'install ok installed'
FAKE
# apt-get: records each call; "install" removes the packages from missing.
cat > "$fake_bin/apt-get" <<'FAKE'
#!/usr/bin/env bash
echo "$*" >> "$STATE/apt_calls"
if [[ "$1" == "install" ]]; then
  for arg in "$@"; do
    grep -vx -- "$arg" "$STATE/missing" > "$STATE/missing.new" || true
    mv "$STATE/missing.new" "$STATE/missing"
  done
fi
FAKE
cat > "$fake_bin/id" <<'FAKE'
#!/usr/bin/env bash
echo "${FAKE_UID:-0}"
FAKE
chmod +x "$fake_bin"/*
export PATH="$fake_bin:$PATH" STATE="$state" BAZELW_NO_EXEC=1

fail() { echo "FAIL: $*" >&2; exit 1; }

# Root, one package missing: one apt-get update, one install of that package.
echo libtorch-dev > "$state/missing"
: > "$state/apt_calls"
"$bazelw" 2> "$state/stderr" || fail "first run exited $?"
grep -q "^update" "$state/apt_calls" || fail "no apt-get update"
grep -q "^install .*libtorch-dev" "$state/apt_calls" || fail "libtorch-dev not installed"
[[ $(grep -c . "$state/apt_calls") == 2 ]] || fail "expected 2 apt-get calls: $(cat "$state/apt_calls")"

# Second run: nothing missing, so no apt-get and no output at all.
: > "$state/apt_calls"
"$bazelw" > "$state/stdout" 2> "$state/stderr" || fail "second run exited $?"
[[ ! -s "$state/apt_calls" ]] || fail "second run called apt-get: $(cat "$state/apt_calls")"
[[ ! -s "$state/stdout" && ! -s "$state/stderr" ]] || fail "second run printed something"

# Non-root with a package missing: exit 2, one line naming it, no apt-get.
echo libgloo-dev > "$state/missing"
: > "$state/apt_calls"
set +e
FAKE_UID=1000 "$bazelw" 2> "$state/stderr"
code=$?
set -e
[[ $code == 2 ]] || fail "non-root run exited $code, want 2"
[[ $(grep -c . "$state/stderr") == 1 ]] || fail "want one line, got: $(cat "$state/stderr")"
grep -q "libgloo-dev" "$state/stderr" || fail "message does not name the package"
[[ ! -s "$state/apt_calls" ]] || fail "non-root run called apt-get"
echo PASS
