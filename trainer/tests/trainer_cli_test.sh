#!/usr/bin/env bash
# The trainer binary's flag refusals: exit codes and one-line messages for
# bad flags (checked before any rank starts). Bad input files, settings that
# cannot work, a non-finite loss and --estimate_memory: trainer_input_test.sh;
# real runs: trainer_run_test.sh.
set -euo pipefail
source trainer/tests/cli_test_lib.sh
# Two shards: the flag rules, then the flags that would do nothing here.
shard="${TEST_SHARD_INDEX:-}"
[[ -z "${TEST_SHARD_STATUS_FILE:-}" ]] || touch "$TEST_SHARD_STATUS_FILE"
part() { [[ -z "$shard" || "$shard" == "$1" ]]; }
if part 0; then

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
fi

if part 1; then
# A flag that would do nothing in this configuration: refused, one line, and
# the refused run creates nothing (result, trace or checkpoint directory).
made=(--out="$out/made/r.json" --trace_dir="$out/made_trace")
refused_creates_nothing() {
  [[ "$(wc -l < "$out/stderr")" == 1 ]] || { cat "$out/stderr" >&2; fail "not one line: $*"; }
  for path in made made_trace made_ckpt; do
    [[ ! -e "$out/$path" ]] || fail "a refused run created $path: $*"
  done
}
expect 2 "--exact_chunk applies to --reduction=exact, not float: it would do nothing" \
  "${tiny[@]}" "${made[@]}" --exact_chunk=2
refused_creates_nothing --exact_chunk
for args in "--lr_decay_steps=2" "--min_lr=1e-5"; do
  expect 2 "${args%%=*} applies to --lr_schedule=cosine, not constant: it would do nothing" \
    "${tiny[@]}" "${made[@]}" --lr_schedule=constant "$args"
  refused_creates_nothing "$args"
done
expect 0 "--checkpoint_dir=$out/preempt_ckpt without --save_every: a checkpoint is saved only on a preemption notice (SIGTERM)" \
  "${tiny[@]}" --out="$out/preempt/r.json" --checkpoint_dir="$out/preempt_ckpt"
[[ -z "$(ls -A "$out/preempt_ckpt" 2>/dev/null | grep -v '^\.')" ]] \
  || fail "--checkpoint_dir without --save_every saved without a preemption: $(ls -A "$out/preempt_ckpt")"
expect 2 "--keep_last=2 needs --checkpoint_dir: this run saves no checkpoint" \
  "${tiny[@]}" "${made[@]}" --keep_last=2
refused_creates_nothing --keep_last
expect 2 "--fault=;: names no fault" "${tiny[@]}" "${made[@]}" "--fault=;"
refused_creates_nothing "--fault=;"
expect 2 "--fault=slow:rank=1,ms=3000: the delay 3s is not shorter than --collective_timeout=3s" \
  "${tiny[@]}" "${made[@]}" --fault=slow:rank=1,ms=3000 --collective_timeout=3s
refused_creates_nothing slow
expect 2 "--fault=slow:rank=1,ms=5,every=4: every=4 fires on no step of --steps=3" \
  "${tiny[@]}" "${made[@]}" --fault=slow:rank=1,ms=5,every=4
refused_creates_nothing every
# The controls: where the flags apply, validation passes (--estimate_memory
# exits 0 right after it).
"$trainer" "${tiny[@]}" --reduction=exact --exact_chunk=2 --lr_schedule=cosine \
  --lr_decay_steps=3 --min_lr=1e-5 --estimate_memory > "$out/stdout" 2> "$out/stderr" ||
  { cat "$out/stderr" >&2; fail "the flags were refused where they apply"; }
fi

if part 0; then
# Nothing started: no launcher line.
expect 2 "--n_heads=3" "${tiny[@]}" --n_heads=3
! grep -q "launch:" "$out/stderr" || fail "a bad flag reached the launcher"
fi
echo "PASS"
