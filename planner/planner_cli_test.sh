#!/usr/bin/env bash
# The planner binary: each kind of bad input is one line naming the field or
# rule and exit 2, before anything is written; predict, search and reproduce
# write their JSON and Markdown.
set -euo pipefail
planner=planner/planner
out="$TEST_TMPDIR"
hand=planner/testdata/hand_cluster.json
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE TEXT ARGS...: the exit code, and TEXT in stderr's one line.
expect() {
  local code="$1" text="$2"
  shift 2
  local rc=0
  "$planner" "$@" > "$out/stdout" 2> "$out/stderr" || rc=$?
  [[ "$rc" == "$code" ]] || { cat "$out/stderr" >&2; fail "exit $rc, not $code: $*"; }
  grep -qF -- "$text" "$out/stderr" || { cat "$out/stderr" >&2; fail "no '$text'"; }
  [[ "$(grep -c . "$out/stderr")" == 1 ]] || { cat "$out/stderr" >&2; fail "not one line"; }
}

# A cluster file missing a field.
grep -v devices_per_node "$hand" > "$out/missing.json"
expect 2 "devices_per_node is missing" predict --cluster="$out/missing.json" \
  --model=tiny --out="$out/p.json"
[[ ! -e "$out/p.json" ]] || fail "bad input wrote a result"
# A layout that does not divide the model.
expect 2 "--n_layers=12 is not divisible by pp 5" predict --cluster="$hand" \
  --model=gpt2-124m --pp=5 --out="$out/p.json"
expect 2 "--n_heads=12 is not divisible by tp 8" predict --cluster="$hand" \
  --model=gpt2-124m --tp=8 --out="$out/p.json"
# A model that fits nowhere.
expect 2 "fits no layout of 8 ranks" search --cluster="$hand" --model=gpt3-175b \
  --global_batch=64 --out="$out/s.json"
expect 2 "is not a named model" predict --cluster="$hand" --model=gpt9 --out="$out/p.json"
expect 2 "is not a planner command" plan --cluster="$hand"

# The good paths.
"$planner" predict --cluster="$hand" --model=tiny --dp=2 --micro_batch=8 \
  --out="$out/p.json" > "$out/stdout" || fail "predict exited $?"
grep -qF '"tokens_per_second"' "$out/p.json" || fail "no prediction in the JSON"
grep -qF "dp2 tp1 pp1 ddp" "$out/p.md" || fail "no layout row in the Markdown"
"$planner" search --cluster="$hand" --model=tiny --global_batch=32 \
  --out="$out/s.json" > "$out/stdout" || fail "search exited $?"
grep -qF "bazel run //trainer -- --nproc=" "$out/stdout" || fail "no trainer command"
grep -qF "best_trainer_layout" "$out/s.json" || fail "no best trainer layout"
"$planner" reproduce --cluster=planner/testdata/selene_a100.cluster.json \
  --table=planner/testdata/megatron_2021_table1.json --out="$out/r.json" \
  > "$out/stdout" || fail "reproduce exited $?"
grep -qF "1008.0B" "$out/r.md" || fail "no 1T row"
echo PASS
