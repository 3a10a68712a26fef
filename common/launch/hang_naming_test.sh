#!/usr/bin/env bash
# The launcher names the rank a hung group waits for, with real trainer ranks
# (docs/faults.md, "When a rank hangs"). One case per shard:
#  0. a hang during step 1 at 3 ranks over TCP: the waiting ranks are inside
#     the first bcube all-reduce, which connects its Gloo context (a lazy
#     connect that needs every rank; before the fix they were not marked
#     waiting and the group sat out --first_step_timeout): the launcher's "waiting" lines and its heartbeat
#     verdict name rank 1 within the first step's allowance (2 s with the
#     floor shrunk to 1 s), not after --first_step_timeout (60 s here).
#     Negative: the same group without a hang prints neither and exits 0.
#  1. 2 ranks, the waiting rank's own collective timeout (2 s) ends the hang
#     before the heartbeat (--test_only_heartbeat_never_stops keeps the watch
#     from acting): the last line names rank 1, the rank waited for, ahead
#     of rank 0, the rank that timed out. Negative: a rank that exits on its
#     own (code 7) with no stall: the line names only it.
#  2. the same at 3 ranks, rank 2 hung: the last line names rank 2.
set -euo pipefail
# trainer, out, fail, tiny, run NAME CODE ARGS..., last NAME REGEX.
source common/launch/supervision_test_lib.sh
tiny+=(--steps=3)
shard="${TEST_SHARD_INDEX:-0}"
[[ -z "${TEST_SHARD_STATUS_FILE:-}" ]] || touch "$TEST_SHARD_STATUS_FILE"

case "$shard" in
  0)
    # Step 1's collective timeout is 60 s: only the heartbeat ends it sooner.
    # Over TCP (shared memory has no lazy connect): the all-reduce is bcube.
    step1=(--nproc=3 --transport=tcp --first_step_timeout=60s --collective_timeout=30s
           --wait_progress_every=1s)
    run step1 1 "${step1[@]}" --fault=hang:rank=1,step=1
    ended=$(/usr/bin/python3 -c 'import datetime; print(datetime.datetime.now().strftime("%Y%m%d %H:%M:%S.%f"))')
    grep -qE "^launch: waiting: no progress for [0-9.]+m?s: rank 1 is in no collective \(step 1, [a-z_]+\); .* while ranks 0, 2 wait in [a-z_]+ #[0-9]+ \(step 1, [a-z_]+\): the group waits for rank 1 \(the heartbeat stops the group after 2s\)$" \
      "$out/step1.err" || { cat "$out/step1.err" >&2; fail "step1: no waiting line naming rank 1"; }
    last step1 "^launch: heartbeat: no progress for [0-9.]+m?s: rank 1 is in no collective \(step 1, [a-z_]+\); .* while ranks 0, 2 wait in [a-z_]+ #[0-9]+ \(step 1, [a-z_]+\): the group waits for rank 1; terminated ranks 0, 1, 2"
    # The allowance (2 s) + the teardown (at most the 2 s kill grace) + 6 s
    # for a loaded machine, far below the 60 s first-step timeout.
    /usr/bin/python3 - "$out/step1.err" "$ended" <<'PY' || fail "step1: not named within the first step's allowance"
import datetime, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"\[rank 1\] [EIW](\d{8} \d\d:\d\d:\d\d\.\d+) .*--fault=hang:rank=1,step=1", text)
assert m, "no hang announcement"
fmt = "%Y%m%d %H:%M:%S.%f"
took = (datetime.datetime.strptime(sys.argv[2], fmt) - datetime.datetime.strptime(m.group(1), fmt)).total_seconds()
print("the launcher named rank 1 and ended the group %.2f s after the hang" % took)
assert took < 10, took
PY
    run clean 0 "${step1[@]}"
    ! grep -qE "^launch: (waiting|heartbeat):" "$out/clean.err" ||
      { cat "$out/clean.err" >&2; fail "clean: a group that never stalled was reported"; }
    ;;
  1)
    never=(--collective_timeout=2s --test_only_heartbeat_never_stops)
    run two 1 --nproc=2 "${never[@]}" --fault=hang:rank=1,step=2
    grep -qE "^\[rank 0\] .*all_reduce #[0-9]+ .* on rank 0 of 2 failed after timeout 2s" "$out/two.err" ||
      { cat "$out/two.err" >&2; fail "two: rank 0's collective did not time out"; }
    ! grep -q "^launch: heartbeat:" "$out/two.err" || fail "two: the heartbeat acted"
    last two "^launch: the group waited for rank 1 \(no progress for [0-9.]+m?s: rank 1 is in no collective \(step 2, [a-z_]+\); .* while rank 0 waits in [a-z_]+ #[0-9]+ \(step 2, [a-z_]+\): the group waits for rank 1\); rank 0 \(pid [0-9]+\) exited with code 1; terminated rank 1"
    run own 1 --nproc=2 "${never[@]}" --fault=exit:rank=1,step=2,code=7
    last own "^launch: rank 1 \(pid [0-9]+\) exited with code 7; terminated rank 0"
    ;;
  2)
    run three 1 --nproc=3 --collective_timeout=2s --test_only_heartbeat_never_stops \
      --fault=hang:rank=2,step=2
    last three "^launch: the group waited for rank 2 \(no progress for [0-9.]+m?s: rank 2 is in no collective \(step 2, [a-z_]+\); .* while ranks 0, 1 wait in [a-z_]+ #[0-9]+ \(step 2, [a-z_]+\): the group waits for rank 2\); rank [01] \(pid [0-9]+\) exited with code 1; terminated ranks? "
    ;;
esac
echo PASS
