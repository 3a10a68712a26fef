#!/usr/bin/env bash
set -euo pipefail
tool="$(pwd)/ckpt_tool/ckpt_tool"
make="$(pwd)/ckpt_tool/make_test_checkpoint"
root="$TEST_TMPDIR/ckpt"
out="$TEST_TMPDIR/out"
mkdir -p "$root" "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { local code=0; "$tool" "$@" > "$out/stdout" 2> "$out/stderr" || code=$?; echo "$code"; }

# Two shards (Bazel's sharding protocol; each ckpt_tool start loads LibTorch,
# ~0.7 s): inspect, verify and export on one, compare and prune on the other.
shard="${TEST_SHARD_INDEX:-0}" shards="${TEST_TOTAL_SHARDS:-1}"
[[ -z "${TEST_SHARD_STATUS_FILE:-}" ]] || touch "$TEST_SHARD_STATUS_FILE"

if [[ "$shard" == 0 ]]; then
"$make" "$root" 2 && "$make" "$root" 4 || fail "making checkpoints"
[[ "$(run)" == 2 ]] || fail "no command: want 2"
[[ "$(run frobnicate "$root")" == 2 ]] || fail "bad command: want 2"
grep -qF "unknown command 'frobnicate'" "$out/stderr" || fail "the unknown command is not named"
[[ "$(run verify "$root" "$root")" == 2 ]] || fail "an extra operand: want 2"
grep -qF "verify takes 1 path(s), got 2" "$out/stderr" || fail "extra operand message"

[[ "$(run inspect "$root")" == 0 ]] || { cat "$out/stderr" >&2; fail "inspect"; }
grep -qF "$root/step_00000004: step 4 of run test-run, ddp on 2 ranks" "$out/stdout" || { cat "$out/stdout" >&2; fail "inspect header"; }
grep -qF "| model/w | float32 | 2x3 | 2 | 24 |" "$out/stdout" || fail "inspect tensor row"
[[ "$(run inspect "$root/step_00000002" --json)" == 0 ]] || fail "inspect --json"
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["step"]=="2" and s["world_size"]==2 and len(s["ranks"])==2' "$out/stdout" || fail "inspect JSON"

[[ "$(run verify "$root")" == 0 ]] || { cat "$out/stderr" >&2; fail "verify"; }
grep -qF "step_00000004: OK" "$out/stdout" || fail "verify OK line"

printf 'X' | dd of="$root/step_00000004/rank_00001.bin" bs=1 seek=25 conv=notrunc 2>/dev/null
[[ "$(run verify "$root/step_00000004")" == 1 ]] || fail "corrupt: want 1"
# Byte 25 is in rank 1's range of model/w (elements 4..5: bytes [24, +8)),
# named by its range digest.
grep -qF "rank_00001.bin: corrupt: SHA-256 differs from the manifest's in tensor model/w (bytes [24, +8))" "$out/stderr" || { cat "$out/stderr" >&2; fail "corrupt message"; }
# A root whose `latest` fails is not fine (its newest save is lost): exit 1,
# naming the checkpoint a resume would fall back to.
[[ "$(run verify "$root")" == 1 ]] || fail "verify root with a broken newest: want 1"
grep -qF "\`latest\` names step_00000004, which fails verification" "$out/stderr" || { cat "$out/stderr" >&2; fail "latest's failure not named"; }
grep -qF "a resume would fall back to step_00000002, the newest checkpoint that verifies" "$out/stderr" || fail "fallback not named"
[[ "$(run inspect "$root")" == 0 ]] || fail "inspect root with a broken newest"
grep -qF "falling back to step_00000002" "$out/stdout" || fail "inspect's fallback note"

rm "$root/step_00000002/rank_00000.meta"
[[ "$(run verify "$root/step_00000002")" == 1 ]] || fail "missing: want 1"
grep -qF "rank_00000.meta: missing (listed in the manifest)" "$out/stderr" || fail "missing message"
[[ "$(run verify "$TEST_TMPDIR/nowhere")" == 1 ]] || fail "no path: want 1"

# export: a corrupt checkpoint is refused; usage errors before anything.
[[ "$(run export "$root/step_00000004" --format=torch --out="$TEST_TMPDIR/x.pt")" == 1 ]] || fail "export corrupt: want 1"
grep -qF "export to $TEST_TMPDIR/x.pt failed (nothing was written there): " "$out/stderr" || fail "export failure not named by its path"
grep -qF "rank_00001.bin: corrupt" "$out/stderr" || fail "export names the corrupt file"
[[ ! -e "$TEST_TMPDIR/x.pt" ]] || fail "export wrote a file"
[[ "$(run export "$root" --format=onnx --out="$TEST_TMPDIR/x.pt")" == 2 ]] || fail "export --format: want 2"
touch "$TEST_TMPDIR/exists.pt"
[[ "$(run export "$root" --format=torch --out="$TEST_TMPDIR/exists.pt")" == 2 ]] || fail "export over a file: want 2"
fi

if [[ "$shard" == $((shards - 1)) ]]; then
# compare: the 2-rank checkpoint equals the same global tensors on 1 rank;
# one flipped element is named (tensor, flat and nd index, both values).
cmp="$TEST_TMPDIR/cmp"
"$make" "$cmp/two" 3 && "$make" "$cmp/one" 3 test-run 1 && "$make" "$cmp/flip" 3 test-run 1 4 || fail "making compare checkpoints"
[[ "$(run compare "$cmp/two" "$cmp/one")" == 0 ]] || { cat "$out/stdout" "$out/stderr" >&2; fail "compare equal: want 0"; }
grep -q "^EQUAL: 2 tensors compared" "$out/stdout" || fail "compare EQUAL line"
[[ "$(run compare "$cmp/two" "$cmp/flip")" == 1 ]] || fail "compare flipped: want 1"
grep -qF "model/w: element 4 [1, 1]: left 5, right 5.5; max |difference| 0.5 over 1 element(s)" "$out/stdout" || { cat "$out/stdout" >&2; fail "compare names the element"; }
[[ "$(run compare "$cmp/two" "$cmp/flip" --tolerance=0.5)" == 0 ]] || fail "within --tolerance: want 0"
[[ "$(run compare "$cmp/two" "$cmp/flip" --json)" == 1 ]] || fail "compare --json"
/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); d=c["differences"][0]; assert d["name"]=="model/w" and d["first_index"]=="4", d' "$out/stdout" || fail "compare JSON"
"$make" "$cmp/later" 5 test-run 1 || fail "making step 5"
[[ "$(run compare "$cmp/one" "$cmp/later")" == 1 ]] || fail "another step: want 1"
grep -qF "train state: step 3 vs step 5" "$out/stdout" || fail "train state difference"
grep -qF "data position: data_position 12 vs data_position 20" "$out/stdout" || fail "data position difference"
[[ "$(run compare "$cmp/two" "$TEST_TMPDIR/nowhere")" == 1 ]] || fail "compare a missing path: want 1"
[[ "$(run compare "$cmp/two" "$cmp/one" --tolerance=-1)" == 2 ]] || fail "negative tolerance: want 2"

# prune: the trainer's retention rules, offline.
pr="$TEST_TMPDIR/prune"
for s in 1 2 3 4 5; do "$make" "$pr" $s run-a || fail "making run-a $s"; done
"$make" "$pr" 9 run-b || fail "making run-b"   # another run, newest of all
printf 'step_00000002\n' > "$pr/latest"          # `latest` names an old one
before="$(ls "$pr")"
[[ "$(run prune "$pr" --keep_last=1 --run_id=run-a --dry_run)" == 0 ]] || fail "dry run"
[[ "$(ls "$pr")" == "$before" ]] || fail "--dry_run deleted something"
grep -qF "would delete step_00000004 (beyond the newest 1 of run run-a)" "$out/stdout" || { cat "$out/stdout" >&2; fail "dry run lists"; }
grep -qF "keep step_00000002 (\`latest\` names it)" "$out/stdout" || fail "dry run keeps latest"
grep -qF "keep step_00000009 (another run (run-b))" "$out/stdout" || fail "dry run keeps another run's"
grep -qF "dry run: 3 checkpoint(s) of run run-a would be deleted; nothing was" "$out/stdout" || fail "dry run summary"
[[ "$(run prune "$pr" --keep_last=1 --run_id=run-a)" == 0 ]] || fail "prune"
[[ "$(ls "$pr" | grep step_ | tr '\n' ' ')" == "step_00000002 step_00000005 step_00000009 " ]] || { ls "$pr" >&2; fail "prune left the wrong ones"; }
# Without --run_id: the run `latest` names (run-a here), never run-b.
printf 'step_00000009\n' > "$pr/latest"
[[ "$(run prune "$pr" --keep_last=1)" == 0 ]] || fail "prune latest's run"
grep -qF "of run run-b" "$out/stdout" || fail "default run id is latest's"
[[ "$(ls "$pr" | grep step_ | tr '\n' ' ')" == "step_00000002 step_00000005 step_00000009 " ]] || fail "another run's pruned"
# The newest is kept even when `latest` names another checkpoint.
nw="$TEST_TMPDIR/newest"
for s in 1 2 3; do "$make" "$nw" $s run-a || fail "making newest $s"; done
printf 'step_00000001\n' > "$nw/latest"
[[ "$(run prune "$nw" --keep_last=1)" == 0 ]] || fail "prune newest"
[[ "$(ls "$nw" | grep step_ | tr '\n' ' ')" == "step_00000001 step_00000003 " ]] || { ls "$nw" >&2; fail "newest and latest kept"; }
[[ "$(run prune "$pr" --keep_last=0)" == 2 ]] || fail "--keep_last=0: want 2"

fi
echo PASS
