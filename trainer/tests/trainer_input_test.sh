#!/usr/bin/env bash
# The trainer binary on bad input files, settings that cannot work, a
# non-finite loss (one 1-rank run) and --estimate_memory (no rank started).
set -euo pipefail
source trainer/tests/cli_test_lib.sh

printf 'not a token file' > "$out/bad.bin"
expect 2 "$out/bad.bin: token file is 16 bytes, shorter than its 1024-byte header" \
  "${tiny[@]}" --data="$out/bad.bin"
expect 2 "no_such.bin" "${tiny[@]}" --data="$out/no_such.bin"

expect 3 "step 2 of 3: the loss is not finite on rank 0 (nan) and the gradient norm (nan) is not finite (injected by --fault=nan:rank=0,step=2); every rank stopped before the optimizer update" \
  "${tiny[@]}" --nproc=1 --fault=nan:rank=0,step=2 --out="$out/nan.json"
[[ ! -e "$out/nan.json" ]] || fail "a failed run wrote a result"
# Deterministic (it would happen again): the reserved exit code 3.
grep -qF ") exited with code 3" "$out/stderr" || fail "the nan stop is not exit code 3"

# Settings that cannot work are refused with the reason, before any rank.
expect 2 "--lr_warmup_steps=3 must be < --steps=3: the learning rate would never reach --lr" \
  "${tiny[@]}" --lr_warmup_steps=3
expect 2 "--lr_decay_steps=2 must be after the warm-up end (--lr_warmup_steps=2)" \
  "${tiny[@]}" --lr_warmup_steps=2 --lr_decay_steps=2
# --estimate_memory: every strategy's closed-form bytes per rank, exit 0,
# before any rank starts.
"$trainer" "${tiny[@]}" --nproc=4 --estimate_memory > "$out/estimate" 2> "$out/stderr" \
  || fail "--estimate_memory exited $?"
for row in "| ddp (grad_sync last)" "| zero1 (grad_sync last)" "| zero2 (grad_sync every)" "| fsdp (grad_sync every)" "4 rank(s)"; do
  grep -qF -- "$row" "$out/estimate" || { cat "$out/estimate" >&2; fail "no '$row' in the estimate"; }
done
! grep -q "launch:" "$out/stderr" || fail "--estimate_memory started ranks"
echo "PASS"
