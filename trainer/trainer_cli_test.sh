#!/usr/bin/env bash
# The trainer binary's refusals: exit codes and one-line messages for bad
# flags and settings that cannot work (checked by the launcher before any rank
# starts), bad input files, and a non-finite loss. Real runs and their outputs:
# trainer_run_test.sh.
set -euo pipefail
source trainer/cli_test_lib.sh

expect 2 "unknown flag --no_such_flag" --no_such_flag=1
expect 2 "--d_model=100 must be divisible by --n_heads=3" "${tiny[@]}" --d_model=100 --n_heads=3
expect 2 "--precision=fp16 must be fp32 or bf16" "${tiny[@]}" --precision=fp16
expect 2 "--nproc=0 must be >= 1" "${tiny[@]}" --nproc=0
expect 2 "--grad_accum=0 must be at least 1" "${tiny[@]}" --grad_accum=0
expect 2 "--strategy=zero3 is not a strategy: use ddp, zero1, zero2 (or single, the one-rank reference)" "${tiny[@]}" --strategy=zero3
expect 2 "--inject_nan_rank=2 must be < the world size 2" "${tiny[@]}" --inject_nan_rank=2
expect 2 "--strategy=single runs one rank, but the world size is 2" "${tiny[@]}" --strategy=single
expect 2 "--grad_sync=never must be auto, every or last" "${tiny[@]}" --grad_sync=never
expect 2 "--out=/proc/no_such_dir/r.json: cannot write there" "${tiny[@]}" --out=/proc/no_such_dir/r.json
expect 2 "--first_step_timeout=1m must be >= --collective_timeout=2m" "${tiny[@]}" --first_step_timeout=1m --collective_timeout=2m
expect 2 "--wait_progress_every=0 must be a positive" "${tiny[@]}" --wait_progress_every=0
expect 2 "the run cannot fit in memory: estimated " "${tiny[@]}" --vocab_size=65536 --d_model=8192 --n_layers=48 --n_heads=64
expect 2 "--trace_steps=2:9 must be A:B with 1 <= A <= B <= --steps=3" "${tiny[@]}" --trace_dir="$out/t" --trace_steps=2:9
expect 2 "--trace_steps needs --trace_dir" "${tiny[@]}" --trace_steps=1:2
expect 2 "--ddp_overlap=false applies to --strategy=ddp, not zero1" "${tiny[@]}" --strategy=zero1 --ddp_overlap=false
# Nothing started: no launcher line.
expect 2 "--n_heads=3" "${tiny[@]}" --n_heads=3
! grep -q "launch:" "$out/stderr" || fail "a bad flag reached the launcher"

printf 'not a token file' > "$out/bad.bin"
expect 2 "$out/bad.bin: token file is 16 bytes, shorter than its 1024-byte header" \
  "${tiny[@]}" --data="$out/bad.bin"
expect 2 "no_such.bin" "${tiny[@]}" --data="$out/no_such.bin"

expect 1 "step 2 of 3: the loss is not finite on rank 0 (nan) and the gradient norm (nan) is not finite (injected by --inject_nan_step=2 on rank 0); every rank stopped before the optimizer update" \
  "${tiny[@]}" --nproc=1 --inject_nan_step=2 --out="$out/nan.json"
[[ ! -e "$out/nan.json" ]] || fail "a failed run wrote a result"

# Settings that cannot work are refused with the reason, before any rank.
expect 2 "--lr_warmup_steps=3 must be < --steps=3: the learning rate would never reach --lr" \
  "${tiny[@]}" --lr_warmup_steps=3
expect 2 "--lr_decay_steps=2 must be after the warm-up end (--lr_warmup_steps=2)" \
  "${tiny[@]}" --lr_warmup_steps=2 --lr_decay_steps=2
# --estimate_memory: every strategy's closed-form bytes per rank, exit 0,
# before any rank starts.
"$trainer" "${tiny[@]}" --nproc=4 --estimate_memory > "$out/estimate" 2> "$out/stderr" \
  || fail "--estimate_memory exited $?"
for row in "| ddp (grad_sync last)" "| zero1 (grad_sync last)" "| zero2 (grad_sync every)" "4 rank(s)"; do
  grep -qF -- "$row" "$out/estimate" || { cat "$out/estimate" >&2; fail "no '$row' in the estimate"; }
done
! grep -q "launch:" "$out/stderr" || fail "--estimate_memory started ranks"
echo "PASS"
