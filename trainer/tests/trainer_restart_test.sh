#!/usr/bin/env bash
# Restarts and preemption with real rank processes:
#  - a rank SIGKILLed (--fault=kill) in each phase of a step and of a save,
#    with --max_restarts=1 and --save_every=2: the job completes, the
#    restarted attempt found no half-published checkpoint (its result's
#    tree_at_start: 0 untrusted), the history names the resume point and the
#    steps lost, and the final checkpoint's shard files (parameters and AdamW
#    state) and the losses equal the uninterrupted run's bit for bit;
#  - a NaN loss is not restarted (exit 3 from the rank, the launcher says
#    why) and no checkpoint advances;
#  - SIGTERM to the launcher: the ranks save the step they finish, exit 4,
#    and --resume=latest continues exactly;
#  - the newest checkpoint corrupted (--fault=corrupt) + a restart: the
#    restart says it falls back to the previous one and still ends equal;
#  - --fault=corrupt on a step without a save: exit 2 before any rank.
# A slow rank is no failure: trainer_fault_test, trainer_hang_test.
set -euo pipefail
source trainer/tests/cli_test_lib.sh

run=("${tiny[@]}" --steps=6 --timing_warmup_steps=0 --dropout=0.1 --lr_schedule=cosine
     --lr_warmup_steps=2 --max_grad_norm=0.5 --peak_flops=1e12 --nomarkdown --save_every=2)
shard="${TEST_SHARD_INDEX:-0}" shards="${TEST_TOTAL_SHARDS:-1}"
[[ -z "${TEST_SHARD_STATUS_FILE:-}" ]] || touch "$TEST_SHARD_STATUS_FILE"

# The uninterrupted run: saves after steps 2, 4 and 6.
expect 0 "checkpoint step_00000006" "${run[@]}" --checkpoint_dir="$out/ref" --out="$out/ref.json"

# same_as_reference NAME DIR RESULT FIRST_STEP: the step-6 shard files equal
# the reference's and the result's steps (FIRST_STEP..6) equal its losses.
same_as_reference() {
  local name="$1" dir="$2" result="$3" first="$4"
  for file in rank_00000.bin rank_00001.bin rank_00000.meta rank_00001.meta; do
    cmp -s "$out/ref/step_00000006/$file" "$dir/step_00000006/$file" ||
      fail "$name: $file differs from the uninterrupted run's"
  done
  /usr/bin/python3 - "$out/ref.json" "$result" "$first" <<'PY' || fail "$name: losses differ"
import json, sys
ref = [(s["step"], s["loss"], s["lr"]) for s in json.load(open(sys.argv[1]))["runs"][0]["steps"]]
got = [(s["step"], s["loss"], s["lr"]) for s in json.load(open(sys.argv[2]))["runs"][0]["steps"]]
first = int(sys.argv[3])
assert got == ref[first - 1:], (got, ref)
PY
}

# only_published DIR: every visible step directory has READY.
only_published() {
  for step_dir in "$1"/step_*; do
    [[ -e "$step_dir/READY" ]] || fail "$1: $step_dir has no READY"
  done
}

cases=(
  "kill 0 4 data" "kill 1 4 forward" "kill 0 4 backward" "kill 1 4 optimizer"
  "kill 1 4 checkpoint_write" "kill 0 4 checkpoint_before_ready" "kill 0 4 checkpoint_before_latest"
  nan sigterm corrupt refusal
)
index=0
for case in "${cases[@]}"; do
  (( index++ % shards == shard )) || continue
  read -r kind rank step phase <<< "$case"
  case "$kind" in
  kill)
    dir="$out/$phase"
    expect 0 "launch: restarting all 2 ranks (restart 1 of 1) with --resume=latest" "${run[@]}" \
      --checkpoint_dir="$dir" --max_restarts=1 --fault="kill:rank=$rank,step=$step,phase=$phase" \
      --out="$out/$phase.json"
    grep -qF -- "--fault=kill:rank=$rank,step=$step,phase=$phase: killing this rank" "$out/stderr" ||
      fail "$phase: no kill"
    # Step 4 was trained (its save, if any, interrupted) or not (a step
    # phase): the restart resumes from step 2 either way.
    grep -qF "resumed from $dir/step_00000002" "$out/stderr" || { cat "$out/stderr" >&2; fail "$phase: not resumed from step 2"; }
    case "$phase" in checkpoint_*) lost=2 ;; *) lost=1 ;; esac
    /usr/bin/python3 - "$out/$phase.json" "$dir" "$lost" "$phase" <<'PY' || fail "$phase: restart history"
import json, sys
history = json.load(open(sys.argv[1]))["restarts"]
dir, lost, phase = sys.argv[2], int(sys.argv[3]), sys.argv[4]
assert history["restarts"] == 1 and history["max_restarts"] == 1, history
first, second = history["attempts"]
assert first["resumed_known"] and first["resumed_from"] == "", first
assert "was killed by SIGKILL" in first["ended"], first
assert int(first["last_completed_step"]) == (4 if phase.startswith("checkpoint") else 3), first
assert second["resumed_from"] == dir + "/step_00000002" and int(second["resumed_step"]) == 2, second
assert int(second["last_completed_step"]) == 6 and not second["ended"], second
assert int(history["steps_lost"]) == lost, history
tree = second["tree_at_start"]
# 0 half-published checkpoints: nothing visible that resume must not trust.
assert tree.get("untrusted", 0) == 0, tree
assert tree["latest"] == "step_00000002", tree
names = [c["name"] for c in tree["checkpoints"]]
if phase == "checkpoint_before_latest":
    assert names == ["step_00000002", "step_00000004"] and tree["checkpoints"][1]["orphan"], tree
else:
    assert names == ["step_00000002"], tree
if phase in ("checkpoint_write", "checkpoint_before_ready"):
    assert tree["staging"] == [".step_00000004.tmp"], tree
assert all(c["verified"] for c in tree["checkpoints"]), tree
PY
    grep -qF "restart 1 of 1: attempt 0 (fresh start, completed step" "$out/stderr" || fail "$phase: history not logged"
    only_published "$dir"
    [[ "$(ls -A "$dir" | tr '\n' ' ')" == "latest step_00000002 step_00000004 step_00000006 " ]] ||
      fail "$phase: left $(ls -A "$dir")"
    same_as_reference "$phase" "$dir" "$out/$phase.json" 3
    ;;
  nan)
    dir="$out/nan"
    expect 3 "launch: not restarting: exit code 3 is a deterministic failure" "${run[@]}" \
      --checkpoint_dir="$dir" --max_restarts=1 --fault="nan:rank=1,step=3" --out="$out/nan.json"
    grep -qF "step 3 of 6: the loss is not finite on rank 1 (nan)" "$out/stderr" || fail "nan: no error naming the step and rank"
    grep -qE "launch: rank [01] \(pid [0-9]+\) exited with code 3" "$out/stderr" || fail "nan: not exit 3"
    ! grep -q "launch: restarting" "$out/stderr" || fail "nan: restarted"
    [[ "$(grep -c "fault_injector.*this rank's loss becomes NaN" "$out/stderr")" == 1 ]] || fail "nan: said more than once"
    [[ "$(ls -A "$dir" | tr '\n' ' ')" == "latest step_00000002 " && "$(cat "$dir/latest")" == step_00000002 ]] ||
      fail "nan: a checkpoint advanced: $(ls -A "$dir")"
    [[ ! -e "$out/nan.json" ]] || fail "nan: a failed run wrote a result"
    ;;
  sigterm)
    # Rank 1 sleeps 300 ms per step, so the notice comes mid-run.
    dir="$out/preempted"
    code=0
    "$trainer" "${run[@]}" --checkpoint_dir="$dir" --fault="slow:rank=1,ms=300" --log_every=1 \
      --out="$out/preempted.json" > "$out/stdout" 2> "$out/stderr" &
    pid=$!
    for _ in $(seq 300); do grep -q "step 2/6" "$out/stderr" && break; sleep 0.05; done
    kill -TERM "$pid"
    wait "$pid" || code=$?
    [[ "$code" == 4 ]] || { cat "$out/stderr" >&2; fail "sigterm: exit $code, want 4"; }
    grep -qF "every rank saved its state and stopped (exit 4: preempted)" "$out/stderr" || fail "sigterm: launcher summary"
    stopped="$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["preemption"]["step"])' "$out/preempted.json")"
    (( stopped >= 2 && stopped < 6 )) || fail "sigterm: stopped after step $stopped"
    name="$(printf 'step_%08d' "$stopped")"
    [[ "$(cat "$dir/latest")" == "$name" && -e "$dir/$name/READY" ]] || fail "sigterm: $name not published"
    grep -qF "preemption notice: stopped after step $stopped of 6 with checkpoint $dir/$name" "$out/stderr" || fail "sigterm: not said"
    only_published "$dir"
    expect 0 "resumed from $dir/$name" "${run[@]}" --checkpoint_dir="$dir" --resume=latest \
      --out="$out/resumed.json"
    same_as_reference sigterm "$dir" "$out/resumed.json" $((stopped + 1))
    ;;
  corrupt)
    # Rank 1's shard of step 4 rots once published; rank 0 dies in step 5.
    dir="$out/corrupt"
    expect 0 "falling back to step_00000002" "${run[@]}" --checkpoint_dir="$dir" --max_restarts=1 \
      --fault="corrupt:rank=1,step=4;kill:rank=0,step=5,phase=forward" --out="$out/corrupt.json"
    grep -qF "\`latest\` names step_00000004, which fails verification ($dir/step_00000004/rank_00001.bin: corrupt: SHA-256 differs" "$out/stderr" ||
      fail "corrupt: the detection is not said"
    grep -qF "resumed from $dir/step_00000002" "$out/stderr" || fail "corrupt: not resumed from step 2"
    /usr/bin/python3 - "$out/corrupt.json" <<'PY' || fail "corrupt: restart history"
import json, sys
history = json.load(open(sys.argv[1]))["restarts"]
tree = history["attempts"][1]["tree_at_start"]
assert tree["untrusted"] == 1 and tree["latest"] == "step_00000004", tree
bad = [c for c in tree["checkpoints"] if not c["verified"]]
assert [c["name"] for c in bad] == ["step_00000004"] and "SHA-256" in bad[0]["error"], tree
assert int(history["steps_lost"]) == 2, history  # step 4 done, resumed from 2
PY
    same_as_reference corrupt "$dir" "$out/corrupt.json" 3
    ;;
  refusal)
    expect 2 "--fault=corrupt:rank=1,step=3: the run does not save after step 3" "${run[@]}" \
      --checkpoint_dir="$out/refused" --fault="corrupt:rank=1,step=3"
    [[ "$(wc -l < "$out/stderr")" == 1 ]] || fail "refusal: not one line"
    expect 2 "--fault=corrupt:rank=2,step=4: rank 2 is not a rank of the world size 2" "${run[@]}" \
      --checkpoint_dir="$out/refused" --fault="corrupt:rank=2,step=4"
    ;;
  esac
done
echo PASS
