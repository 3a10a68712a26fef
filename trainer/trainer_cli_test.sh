#!/usr/bin/env bash
# The trainer binary's flag refusals: exit codes and one-line messages for
# bad flags (checked before any rank starts). Bad input files, settings that
# cannot work, a non-finite loss and --estimate_memory: trainer_input_test.sh;
# real runs: trainer_run_test.sh.
set -euo pipefail
source trainer/cli_test_lib.sh

expect 2 "unknown flag --no_such_flag" --no_such_flag=1
expect 2 "--d_model=100 must be divisible by --n_heads=3" "${tiny[@]}" --d_model=100 --n_heads=3
expect 2 "--precision=fp16 must be fp32 or bf16" "${tiny[@]}" --precision=fp16
expect 2 "--nproc=0 must be >= 1" "${tiny[@]}" --nproc=0
expect 2 "--grad_accum=0 must be at least 1" "${tiny[@]}" --grad_accum=0
expect 2 "--strategy=zero3 is not a strategy: use ddp, zero1, zero2, fsdp (or single, the one-rank reference)" "${tiny[@]}" --strategy=zero3
expect 2 "--strategy=single runs one rank, but the world size is 2" "${tiny[@]}" --strategy=single
expect 2 "--grad_sync=never must be auto, every or last" "${tiny[@]}" --grad_sync=never
expect 2 "--out=/proc/no_such_dir/r.json: cannot write there" "${tiny[@]}" --out=/proc/no_such_dir/r.json
expect 2 "--first_step_timeout=1m must be >= --collective_timeout=2m" "${tiny[@]}" --first_step_timeout=1m --collective_timeout=2m
expect 2 "--wait_progress_every=0 must be a positive" "${tiny[@]}" --wait_progress_every=0
expect 2 "the run cannot fit in memory: estimated " "${tiny[@]}" --vocab_size=65536 --d_model=8192 --n_layers=48 --n_heads=64
expect 2 "--trace_steps=2:9 must be A:B with 1 <= A <= B <= --steps=3" "${tiny[@]}" --trace_dir="$out/t" --trace_steps=2:9
expect 2 "--trace_steps needs --trace_dir" "${tiny[@]}" --trace_steps=1:2
expect 2 "--ddp_overlap applies to --strategy=ddp, not zero1: it would do nothing" "${tiny[@]}" --strategy=zero1 --ddp_overlap=false
expect 2 "--reshard_after_forward applies to --strategy=fsdp, not zero2: it would do nothing" "${tiny[@]}" --strategy=zero2 --reshard_after_forward=false
# Given at its default value, a flag that does nothing is refused too.
expect 2 "--bucket_cap_mb applies to --strategy=ddp, zero1 or zero2, not fsdp: it would do nothing" "${tiny[@]}" --strategy=fsdp --bucket_cap_mb=25
expect 2 "--reshard_after_forward applies to --strategy=fsdp, not ddp: it would do nothing" "${tiny[@]}" --strategy=ddp --reshard_after_forward
# Nothing started: no launcher line.
expect 2 "--n_heads=3" "${tiny[@]}" --n_heads=3
! grep -q "launch:" "$out/stderr" || fail "a bad flag reached the launcher"
echo "PASS"
