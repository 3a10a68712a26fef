#!/usr/bin/env bash
# kernel_check's command line where it is built (--config=cuda), with or
# without a GPU: bad usage, a precision other than fp32 and bf16, an unreadable folder and an
# unknown kernel exit 2 with one line before any device work; on the
# reference folder kernel_refs_dump writes, a machine without a GPU gets
# "no usable GPU" (exit 2) and one with a GPU every output within its bound.
set -u
check=trainer/cuda/kernel_check
dump=trainer/cuda/kernel_refs_dump
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect CODE REGEX ARGS...: exit CODE and stderr+stdout matching REGEX.
expect() {
  local want="$1" regex="$2"
  shift 2
  local code=0
  "$check" "$@" > "$tmp/out" 2>&1 || code=$?
  [[ $code == "$want" ]] || fail "$*: exit $code, want $want: $(cat "$tmp/out")"
  grep -Eq "$regex" "$tmp/out" || fail "$*: no '$regex' in: $(cat "$tmp/out")"
}

"$dump" "$tmp/refs" > /dev/null || fail "kernel_refs_dump failed"
expect 2 "^usage: kernel_check"
expect 2 "^kernel_check: --precision=fp16 must be fp32 or bf16$" \
  --precision=fp16 "$tmp/refs"
expect 2 "^kernel_check: REFS_DIR: .*/absent/manifest.txt: cannot open$" "$tmp/absent"
expect 2 "^kernel_check: --kernels: no kernel nope in " --kernels=nope "$tmp/refs"
for precision in fp32 bf16; do
  code=0
  "$check" --precision=$precision "$tmp/refs" > "$tmp/out" 2>&1 || code=$?
  if [[ $code == 2 ]]; then
    grep -Eq "^kernel_check: no usable GPU: " "$tmp/out" || fail "$precision, no GPU: $(cat "$tmp/out")"
    [[ $(wc -l < "$tmp/out") == 1 ]] || fail "$precision, no GPU: want one line: $(cat "$tmp/out")"
  elif [[ $code == 0 ]]; then
    grep -q "^FAIL" "$tmp/out" && fail "$precision, GPU: a FAIL line with exit 0"
    grep -q "^PASS" "$tmp/out" || fail "$precision, GPU: no PASS line: $(cat "$tmp/out")"
    grep -q "; precision $precision" "$tmp/out" || fail "$precision: not named: $(cat "$tmp/out")"
  else
    fail "$precision: exit $code: $(cat "$tmp/out")"
  fi
done
if [[ $failures != 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
