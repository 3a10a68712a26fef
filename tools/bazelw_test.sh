#!/usr/bin/env bash
# Checks ./bazelw with fake dpkg-query / apt-get / id / bazel on PATH: it
# installs what is missing once, printing one line per stage with apt's output
# in the log file it names (printed in full when apt fails), does nothing on a
# second run, and as non-root exits 2 naming the missing package without
# touching apt; `run` builds first with Bazel's output in a named log (printed
# in full when the build fails, with Bazel's exit code), then runs quietly.
set -euo pipefail

bazelw="$(pwd)/bazelw"
fake_bin="$TEST_TMPDIR/bin"
state="$TEST_TMPDIR/state"
mkdir -p "$fake_bin" "$state"

# dpkg-query: every package is installed except those listed in $state/missing.
# (The fakes are POSIX sh: dash starts several times faster than bash, and
# bazelw asks dpkg-query about every package on every run.)
cat > "$fake_bin/dpkg-query" <<'FAKE'
#!/bin/sh
eval "package=\${$#}"
if grep -qx "$package" "$STATE/missing" 2>/dev/null; then exit 1; fi
printf 'install ok installed'
FAKE
# apt-get: records each call and chatters like apt; "install" removes the
# packages from missing, or fails when $STATE/apt_fails exists.
cat > "$fake_bin/apt-get" <<'FAKE'
#!/bin/sh
echo "$*" >> "$STATE/apt_calls"
for i in $(seq 1 50); do echo "Unpacking fake-package-$i (1.0) ..."; done
if [ -e "$STATE/apt_fails" ] && [ "$1" = "install" ]; then
  echo "E: Unable to locate package $2"
  exit 100
fi
if [ "$1" = "install" ]; then
  for arg in "$@"; do
    grep -vx -- "$arg" "$STATE/missing" > "$STATE/missing.new" || true
    mv "$STATE/missing.new" "$STATE/missing"
  done
fi
FAKE
cat > "$fake_bin/id" <<'FAKE'
#!/bin/sh
echo "${FAKE_UID:-0}"
FAKE
# bazel: records each call; chatters; `build` fails when $STATE/build_fails
# exists (exit 1), `run` prints what the program would.
cat > "$fake_bin/bazel" <<'FAKE'
#!/bin/sh
echo "$*" >> "$STATE/bazel_calls"
if [ "$1" = "build" ]; then
  for i in $(seq 1 30); do echo "[$i / 30] Compiling trainer/file_$i.cc"; done
  if [ -e "$STATE/build_fails" ]; then
    echo "ERROR: trainer/file_7.cc: expected ';' (the planted compile error)"
    exit 1
  fi
  exit 0
fi
echo "step 1/200 | loss 5.5894"
FAKE
chmod +x "$fake_bin"/*
export PATH="$fake_bin:$PATH" STATE="$state" BAZELW_NO_EXEC=1
export BAZELW_LOG_DIR="$TEST_TMPDIR/logs"

fail() { echo "FAIL: $*" >&2; exit 1; }

# Root, one package missing: one apt-get update, one install of that package.
echo libtorch-dev > "$state/missing"
: > "$state/apt_calls"
"$bazelw" 2> "$state/stderr" || fail "first run exited $?"
grep -q "^update" "$state/apt_calls" || fail "no apt-get update"
grep -q "^install .*libtorch-dev" "$state/apt_calls" || fail "libtorch-dev not installed"
[[ $(grep -c . "$state/apt_calls") == 2 ]] || fail "expected 2 apt-get calls: $(cat "$state/apt_calls")"
# One line per stage, apt's chatter only in the log file the first line names.
[[ $(grep -c . "$state/stderr") == 2 ]] || fail "want 2 stage lines, got: $(cat "$state/stderr")"
grep -q "^bazelw: installing 1 Debian packages (apt's output: $BAZELW_LOG_DIR/apt_.*\.log)$" "$state/stderr" ||
  fail "no installing line naming the log: $(cat "$state/stderr")"
grep -q "^bazelw: installed 1 packages in [0-9]* s$" "$state/stderr" || fail "no installed line"
apt_log="$(sed -n "s/.*apt's output: \(.*\))$/\1/p" "$state/stderr")"
[[ $(grep -c "Unpacking fake-package" "$apt_log") == 100 ]] || fail "apt's output is not all in $apt_log"
grep -q "Unpacking" "$state/stderr" && fail "apt's output reached the terminal"

# apt fails: its whole output is printed, then one line naming the log; exit 1.
echo libtorch-dev > "$state/missing"
touch "$state/apt_fails"
set +e
"$bazelw" 2> "$state/stderr"
code=$?
set -e
rm "$state/apt_fails"
[[ $code == 1 ]] || fail "a failed apt-get exited $code, want 1"
[[ $(grep -c "Unpacking fake-package" "$state/stderr") == 100 ]] || fail "the failed apt's output was not shown in full"
grep -q "E: Unable to locate package" "$state/stderr" || fail "apt's error was not shown"
tail -1 "$state/stderr" | grep -q "^bazelw: apt-get failed with exit 100 (its output is above and in $BAZELW_LOG_DIR/apt_" ||
  fail "last line does not name the failure and the log: $(tail -1 "$state/stderr")"
: > "$state/missing"

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
# `run`: one line for the build (naming its log), its time, one for the run,
# then the program's own output; Bazel's chatter only in the log.
: > "$state/missing"
unset BAZELW_NO_EXEC
: > "$state/bazel_calls"
"$bazelw" run --config=bench //trainer -- --steps=3 > "$state/stdout" 2> "$state/stderr" || fail "run exited $?"
diff <(sed -e 's/_[0-9TZ]*_[A-Za-z0-9]*\.log/_X.log/' -e 's/in [0-9]* s$/in N s/' "$state/stderr") - <<EXPECTED || fail "stage lines differ"
bazelw: building //trainer (Bazel's output: $BAZELW_LOG_DIR/build_X.log)
bazelw: built in N s
bazelw: running //trainer
EXPECTED
[[ "$(cat "$state/stdout")" == "step 1/200 | loss 5.5894" ]] || fail "the program's output: $(cat "$state/stdout")"
diff "$state/bazel_calls" - <<'EXPECTED' || fail "bazel calls differ"
build --config=bench //trainer
run --noshow_progress --ui_event_filters=-info --show_result=0 --config=bench //trainer -- --steps=3
EXPECTED

# Logs do not pile up: of 25 earlier build logs, the newest 19 and this run's are kept.
rm -f "$BAZELW_LOG_DIR"/build_*.log
for i in $(seq 10 34); do : > "$BAZELW_LOG_DIR/build_20260101T0000${i}Z.log"; done
"$bazelw" run //trainer > /dev/null 2>&1 || fail "run exited $?"
[[ $(ls "$BAZELW_LOG_DIR"/build_*.log | wc -l) == 20 ]] || fail "want 20 build logs, got $(ls "$BAZELW_LOG_DIR"/build_*.log | wc -l)"
[[ ! -e "$BAZELW_LOG_DIR/build_20260101T000015Z.log" && -e "$BAZELW_LOG_DIR/build_20260101T000016Z.log" ]] ||
  fail "the oldest logs were not the ones removed"

# The build fails: Bazel's whole output, a line naming the log, Bazel's exit code; nothing runs.
touch "$state/build_fails"
: > "$state/bazel_calls"
set +e
"$bazelw" run //trainer > "$state/stdout" 2> "$state/stderr"
code=$?
set -e
[[ $code == 1 ]] || fail "a failed build exited $code, want bazel's 1"
[[ $(grep -c "Compiling trainer/file_" "$state/stderr") == 30 ]] || fail "the build's output was not shown in full"
grep -q "planted compile error" "$state/stderr" || fail "the compile error was not shown"
tail -1 "$state/stderr" | grep -q "^bazelw: the build failed with exit 1 (Bazel's output is above and in $BAZELW_LOG_DIR/build_" ||
  fail "last line: $(tail -1 "$state/stderr")"
[[ $(grep -c . "$state/bazel_calls") == 1 ]] || fail "ran after a failed build: $(cat "$state/bazel_calls")"

# Other verbs go straight to Bazel.
rm "$state/build_fails"
: > "$state/bazel_calls"
"$bazelw" test //... > /dev/null 2> "$state/stderr" || fail "test exited $?"
[[ "$(cat "$state/bazel_calls")" == "test //..." && ! -s "$state/stderr" ]] || fail "test was not passed straight through"
echo PASS
