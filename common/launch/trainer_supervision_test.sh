#!/usr/bin/env bash
# The launcher over real trainer ranks, with default flags except the
# heartbeat floor (--test_only_heartbeat_floor shrinks 60 s to 1 s, so the
# first step's allowance is 2 s):
#  - a hang is named by the launcher's last line, naming the rank the others
#    wait for: 3 ranks hung in forward at step 3, 2 ranks hung in the
#    optimizer at step 2 (rank 0 hangs, rank 1 waits);
#  - a NaN loss makes every rank exit 3 and so does the launcher, with one
#    verdict line;
#  - --steps=1's note is true, the report line is printed once and a kept
#    file is said kept;
#  - a rank SIGKILLed in backward while its peers' gradient buckets are in
#    flight: the launcher (hence every rank) is done within 5 s of the death
#    and names the dead rank.
set -euo pipefail
# trainer, out, fail, tiny, run NAME CODE ARGS..., last NAME REGEX.
source common/launch/supervision_test_lib.sh
tiny+=(--steps=4)

run three_forward 1 --nproc=3 --fault=hang:rank=1,step=3,phase=forward
grep -qE "^launch: heartbeat on: .* after 1s \(or 10x the slowest step, at most 4m\); during the first step after 2s" \
  "$out/three_forward.err" || { cat "$out/three_forward.err" >&2; fail "the heartbeat is not printed at start"; }
last three_forward "^launch: heartbeat: no progress for [0-9.]+m?s: rank 1 is in no collective \(step 3, forward\); .* while ranks 0, 2 wait in [a-z_]+ #[0-9]+ \(step [23], [a-z_]+\): the group waits for rank 1; terminated ranks 0, 1, 2; flight recorder dumps in "

run two_optimizer 1 --nproc=2 --fault=hang:rank=0,step=2,phase=optimizer
last two_optimizer "^launch: heartbeat: no progress for .*: rank 0 is in no collective \(step 2, optimizer\); .* while rank 1 waits in .*: the group waits for rank 0; terminated ranks 0, 1"


run nan 3 --nproc=2 --fault=nan:rank=1,step=2
last nan "^launch: rank [01] \(pid [0-9]+\) exited with code 3; .*exit 3 \(a deterministic failure: a retry would fail the same way\)$"

# --steps=1: the note says what rate the one step runs at; the report line
# is printed once, and a user's own file of that name is kept and said kept.
one=(--vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 --seq_len=16 --batch_size=4
     --steps=1 --intra_op_threads=1 --data=synthetic --peak_flops=1e10 --nproc=1)
"$trainer" "${one[@]}" --out="$out/one/t.json" > "$out/one.out" 2> "$out/one.err" ||
  { cat "$out/one.err" >&2; fail "one step failed"; }
grep -qF -- "--steps=1: the learning-rate warm-up shrinks from its default 10 to 0 steps (one step is the end of the cosine schedule: it runs at --min_lr" \
  "$out/one.err" || { cat "$out/one.err" >&2; fail "the --steps=1 note"; }
[[ "$(grep -cE "^(\[rank 0\] )?report: $out/one/t.md$" "$out/one.out")" == 1 ]] ||
  { cat "$out/one.out" >&2; fail "the report line is not printed exactly once"; }
mkdir -p "$out/kept" && echo "my notes" > "$out/kept/t.md"
"$trainer" "${one[@]}" --out="$out/kept/t.json" > "$out/kept.out" 2> "$out/kept.err" ||
  { cat "$out/kept.err" >&2; fail "kept run failed"; }
grep -qF "kept $out/kept/t.md" "$out/kept.out" || { cat "$out/kept.out" >&2; fail "kept file not said kept"; }
! grep -q "^report: " "$out/kept.out" || fail "a kept file announced as the report"
[[ "$(cat "$out/kept/t.md")" == "my notes" ]] || fail "the user's file was overwritten"

start=$(date +%s.%N)
run kill 1 --nproc=3 --fault=kill:rank=1,step=2,phase=backward
end=$(/usr/bin/python3 -c 'import datetime; print(datetime.datetime.now().strftime("%Y%m%d %H:%M:%S.%f"))')
last kill "^launch: rank 1 \(pid [0-9]+\) was killed by SIGKILL \(signal 9\) sent by its own --fault=kill injection; "
/usr/bin/python3 - "$out/kill.err" "$end" <<'PY' || fail "the group did not end within 5 s of the death"
import datetime, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"\[rank 1\] [EIW](\d{8} \d\d:\d\d:\d\d\.\d+) .*--fault=kill:rank=1,step=2,phase=backward", text)
assert m, "no kill announcement"
fmt = "%Y%m%d %H:%M:%S.%f"
death = datetime.datetime.strptime(m.group(1), fmt)
ended = datetime.datetime.strptime(sys.argv[2], fmt)
took = (ended - death).total_seconds()
print("the launcher and every rank were done %.2f s after rank 1's death" % took)
assert took < 5, took
PY
echo PASS
