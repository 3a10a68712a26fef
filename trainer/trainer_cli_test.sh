#!/usr/bin/env bash
# The trainer binary end to end: exit codes and messages for bad flags, bad
# input files and a non-finite loss, and the three output files of a tiny run.
set -euo pipefail

trainer="$(pwd)/trainer/trainer"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
tiny=(--vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 --seq_len=16
      --batch_size=4 --steps=3 --timing_warmup_steps=1 --intra_op_threads=1
      --data=synthetic)

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE SUBSTRING ARGS...: runs the trainer, checks the exit code and
# that stderr contains SUBSTRING.
expect() {
  local code="$1" substring="$2"
  shift 2
  local actual=0
  "$trainer" "$@" > "$out/stdout" 2> "$out/stderr" || actual=$?
  [[ "$actual" == "$code" ]] || { cat "$out/stderr" >&2; fail "exit $actual, want $code: $*"; }
  grep -qF -- "$substring" "$out/stderr" || { cat "$out/stderr" >&2; fail "stderr lacks '$substring': $*"; }
}

expect 2 "unknown flag --no_such_flag" --no_such_flag=1
expect 2 "--d_model=100 must be divisible by --n_heads=3" "${tiny[@]}" --d_model=100 --n_heads=3
expect 2 "--precision=fp16 must be fp32 or bf16" "${tiny[@]}" --precision=fp16

printf 'not a token file' > "$out/bad.bin"
expect 2 "$out/bad.bin: token file is 16 bytes, shorter than its 1024-byte header" \
  "${tiny[@]}" --data="$out/bad.bin"
expect 2 "no_such.bin" "${tiny[@]}" --data="$out/no_such.bin"

expect 1 "step 2 of 3: the loss (nan) or the gradient norm (nan) is not finite (injected by --inject_nan_step=2); stopped before the optimizer update" \
  "${tiny[@]}" --inject_nan_step=2 --out="$out/nan.json"
[[ ! -e "$out/nan.json" ]] || fail "a failed run wrote a result"

expect 0 "step 3/3 | loss" "${tiny[@]}" --dropout=0.1 --out="$out/run.json"
grep -q '"schema_version": 1' "$out/run.json" || fail "no schema_version"
grep -q '"config_fingerprint": "[0-9a-f]\{64\}"' "$out/run.json" || fail "no fingerprint"
grep -q '"tool": "trainer"' "$out/run.json" || fail "no run context"
grep -q '<svg' "$out/run.svg" || fail "no SVG"
grep -q '^## Summary' "$out/run.md" || fail "no Markdown summary"
grep -q '| final loss |' "$out/stdout" || fail "no summary table on stdout"

# The default data file resolves in the runfiles (as in the checkout).
expect 0 "data: testdata/gnu_licenses.bin (148391 tokens)" \
  --d_model=32 --n_layers=1 --seq_len=16 --batch_size=2 --steps=2 \
  --timing_warmup_steps=0 --intra_op_threads=1 --nomarkdown --out="$out/default_data.json"
echo "PASS"
