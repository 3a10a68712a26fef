#!/usr/bin/env bash
# Checkpoints with real rank processes: bad checkpoint flags exit 2 with one
# line before any rank starts; another run's checkpoints block a fresh run;
# (a group restarted by --max_restarts after a kill in each phase:
# //trainer:trainer_restart_test);
# a rank SIGKILLed (--fault=kill) in each checkpoint phase leaves the previous
# checkpoint byte-identical and no directory without READY for resume to see,
# and --resume=latest then finishes equal to the uninterrupted run: losses of
# steps 4..6 and every byte of the step-6 shard files (parameters and AdamW
# state), also when the kill (mid-write, before `latest`) lands in
# --async_checkpoint's background save.
# Exact resume per strategy on rank threads is
# //trainer/checkpoint:resume_test.
set -euo pipefail
source trainer/tests/cli_test_lib.sh

run=("${tiny[@]}" --steps=6 --timing_warmup_steps=0 --dropout=0.1 --lr_schedule=cosine
     --lr_warmup_steps=2 --max_grad_norm=0.5 --peak_flops=1e12 --nomarkdown --save_every=3)

# expect_refusal SUBSTRING ARGS...: exit 2, one line, no rank started.
expect_refusal() {
  expect 2 "$@"
  [[ "$(wc -l < "$out/stderr")" == 1 ]] || { cat "$out/stderr" >&2; fail "not one line: ${*:2}"; }
  ! grep -q "launch:" "$out/stderr" || fail "a rank started: ${*:2}"
}
# Two shards (Bazel's sharding protocol): the phases are split between them;
# each runs the uninterrupted reference.
shard="${TEST_SHARD_INDEX:-0}" shards="${TEST_TOTAL_SHARDS:-1}"
[[ -z "${TEST_SHARD_STATUS_FILE:-}" ]] || touch "$TEST_SHARD_STATUS_FILE"

# The flag rules and the plan as the binary applies them (every rule and
# message: //trainer/checkpoint:plan_test).
if [[ "$shard" == $((shards - 1)) ]]; then
  expect_refusal "--resume=latest needs --checkpoint_dir" "${tiny[@]}" --resume=latest
  touch "$out/a_file"
  expect_refusal "--checkpoint_dir=$out/a_file/ckpt: cannot write there" "${tiny[@]}" --checkpoint_dir="$out/a_file/ckpt" --save_every=1
fi

# The uninterrupted run (it saves after steps 3 and 6).
expect 0 "checkpoint step_00000006" "${run[@]}" --checkpoint_dir="$out/ref" --out="$out/ref.json"
if [[ "$shard" == $((shards - 1)) ]]; then
  expect_refusal "holds READY checkpoints of another run" "${run[@]}" --checkpoint_dir="$out/ref"
fi

tree_hash() { (cd "$1" && find . -type f | sort | xargs sha256sum); }

index=0
# "async": the kill lands in --async_checkpoint's background thread, which
# must behave exactly like a synchronous save.
for fault in "1 checkpoint_write" "0 checkpoint_before_ready" "0 checkpoint_before_latest" \
             "1 checkpoint_write async" "0 checkpoint_before_latest async"; do
  read -r rank phase mode <<< "$fault"
  (( index++ % shards == shard )) || continue
  async=()
  [[ "${mode:-}" != async ]] || async=(--async_checkpoint)
  dir="$out/$phase${mode:-}"
  mkdir -p "$dir"
  cp -r "$out/ref/step_00000003" "$dir/"
  echo step_00000003 > "$dir/latest"
  before="$(tree_hash "$dir/step_00000003")"
  # Resumed at 3, killed while saving step 6.
  expect 1 "sent by its own --fault=kill injection" "${run[@]}" --checkpoint_dir="$dir" --resume=latest \
    --fault="kill:rank=$rank,step=6,phase=$phase" "${async[@]}" --out="$out/$phase${mode:-}.json"
  grep -qF -- "--fault=kill:rank=$rank,step=6,phase=$phase: killing this rank" "$out/stderr" || fail "$phase: no kill"
  [[ "$(tree_hash "$dir/step_00000003")" == "$before" ]] || fail "$phase: the previous checkpoint changed"
  [[ "$(cat "$dir/latest")" == step_00000003 ]] || fail "$phase: latest moved"
  for step_dir in "$dir"/step_*; do
    [[ -e "$step_dir/READY" ]] || fail "$phase: $step_dir has no READY"
  done
  if [[ "$phase" == checkpoint_before_latest ]]; then
    [[ -e "$dir/step_00000006/READY" ]] || fail "$phase: the renamed checkpoint is missing"
  else
    [[ ! -e "$dir/step_00000006" ]] || fail "$phase: step_00000006 is visible"
    [[ -d "$dir/.step_00000006.tmp" ]] || fail "$phase: no staging left (was the kill mid-save?)"
  fi
  if [[ "$phase" == checkpoint_before_ready ]]; then
    [[ -e "$dir/.step_00000006.tmp/manifest.json" && ! -e "$dir/.step_00000006.tmp/READY" ]] ||
      fail "$phase: the kill was not between the manifest and READY"
  fi

  expect 0 "resumed from $dir/step_00000003" "${run[@]}" --checkpoint_dir="$dir" --resume=latest \
    --out="$out/$phase${mode:-}.resumed.json"
  if [[ "$phase" == checkpoint_before_latest ]]; then
    grep -qF "ignoring step_00000006: READY but never named by \`latest\`" "$out/stderr" || fail "$phase: orphan not said"
  fi
  for file in rank_00000.bin rank_00001.bin rank_00000.meta rank_00001.meta; do
    cmp -s "$out/ref/step_00000006/$file" "$dir/step_00000006/$file" || fail "$phase: $file differs from the uninterrupted run's"
  done
  [[ "$(ls -A "$dir" | tr '\n' ' ')" == "latest step_00000003 step_00000006 " ]] || fail "$phase: left $(ls -A "$dir")"
  /usr/bin/python3 - "$out/ref.json" "$out/$phase${mode:-}.resumed.json" <<'PY' || fail "$phase: losses differ"
import json, sys
ref = [(s["step"], s["loss"], s["lr"]) for s in json.load(open(sys.argv[1]))["runs"][0]["steps"]]
resumed = [(s["step"], s["loss"], s["lr"]) for s in json.load(open(sys.argv[2]))["runs"][0]["steps"]]
assert resumed == ref[3:], (resumed, ref)
PY
done
echo PASS
