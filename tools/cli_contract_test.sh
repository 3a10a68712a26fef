#!/usr/bin/env bash
# What every binary does with input it must not accept (docs/errors.md,
# "Nothing silently wrong"): a stray positional argument is refused (exit 2,
# naming it) and so are outputs that would overwrite each other, before any
# rank starts and before anything is written.
set -euo pipefail
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE SUBSTRING BINARY ARGS...: the exit code, the message, nothing new in $out/w.
expect() {
  local code="$1" substring="$2" binary="$3"
  shift 3
  local actual=0
  "$binary" "$@" > "$out/stdout" 2> "$out/stderr" || actual=$?
  [[ "$actual" == "$code" ]] || { cat "$out/stdout" "$out/stderr" >&2; fail "exit $actual, want $code: $binary $*"; }
  grep -qF -- "$substring" "$out/stderr" || { cat "$out/stderr" >&2; fail "stderr lacks '$substring': $binary $*"; }
  [[ ! -e "$out/w" ]] || fail "a refused run created $out/w: $binary $*"
}

stray="unexpected argument 'foo.bin': this tool takes flags only"
for binary in trainer/trainer comm_bench/comm_bench tp_check/tp_check moe_comm/moe_comm \
              doctor/doctor; do
  expect 2 "$stray" "$(pwd)/$binary" foo.bin --out="$out/w/r.json"
done

# Outputs of one run that are one file, by another spelling.
expect 2 "are the same file: one would overwrite the other" "$(pwd)/comm_bench/comm_bench" \
  --out="$out/w/r.json" --markdown="$out/w/../w/r.json"
expect 2 "are the same file" "$(pwd)/comm_bench/comm_bench" \
  --out="$out/w/r.json" --markdown="$out/w/r.md" --plot="$out/w/./r.md"
# A result whose Markdown companion would be the result itself.
expect 2 "are the same file: one would overwrite the other" "$(pwd)/tp_check/tp_check" \
  --out="$out/w/r.md" --markdown
expect 2 "are the same file" "$(pwd)/moe_comm/moe_comm" --out="$out/w/r.md" --markdown
expect 2 "rank 1's trace in --trace_dir" "$(pwd)/moe_comm/moe_comm" \
  --out="$out/w/rank_1.trace.json" --trace_dir="$out/w" --nproc=2
echo PASS
