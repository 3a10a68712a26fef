#!/usr/bin/env bash
# Hangs and a slow rank with real trainer ranks (docs/faults.md):
#  - rank 1 hangs at step 2: rank 0's collective timeout (3 s) fires within
#    2x of the hang and its error names the collective and its sequence
#    number; both ranks dump their flight recorders (rank 0 at the timeout,
#    rank 1 at the launcher's SIGTERM) and `profiler_agg forensics` names
#    rank 1 and that collective;
#  - with --heartbeat_timeout the launcher names rank 1 although its hang is
#    outside any collective (in forward) while rank 0 waits in one, long
#    before the 30 s collective timeout;
#  - a rank slower than the others every step (but below the heartbeat
#    timeout) is no failure; the step time shows it.
set -euo pipefail
source trainer/tests/cli_test_lib.sh
agg="$(pwd)/profiler_agg/profiler_agg"
# Three steps (the first is start-up), no peak FLOP/s measurement: each run
# is mostly its ranks' start-up.
tiny+=(--peak_flops=1e10)

# The collective timeout alone: the heartbeat (on by default, and below the
# collective timeout) is turned off.
expect 1 "failed after timeout 3s" "${tiny[@]}" \
  --fault=hang:rank=1,step=2 --collective_timeout=3s --heartbeat_timeout=0 \
  --log_dir="$out/timeout" --out="$out/timeout.json"
sequence=$(/usr/bin/python3 - "$out/stderr" <<'PY'
import datetime, re, sys
text = open(sys.argv[1]).read()
def when(rank, pattern):
    m = re.search(r"\[rank %d\] [EIW](\d{8} \d\d:\d\d:\d\d\.\d+) rank %d [^\]]*\] %s"
                  % (rank, rank, pattern), text)
    assert m, "no line like %r on rank %d" % (pattern, rank)
    return datetime.datetime.strptime(m.group(1), "%Y%m%d %H:%M:%S.%f"), m
hang, _ = when(1, re.escape("--fault=hang:rank=1,step=2: this rank stops making progress"))
error, m = when(0, r"communicator broken: DEADLINE_EXCEEDED: all_reduce #(\d+) \(float32, \d+ "
                   r"elements\) on rank 0 of 2 failed after timeout 3s")
waited = (error - hang).total_seconds()
assert waited < 2 * 3, "the error came %.2f s after the hang (bound 6 s)" % waited
# The rank's own error line names the collective and its sequence number too.
assert re.search(r"\[rank 0\] trainer: .*all_reduce #%s \(float32, \d+ elements\) on rank 0 "
                 r"of 2 failed after timeout 3s" % m.group(2), text), "rank 0's error line"
print(m.group(2))
PY
) || fail "the timeout error (see above)"
[[ "$(ls "$out/timeout" | grep -c '^flight_.*\.json$')" == 2 ]] || fail "not one dump per rank: $(ls "$out/timeout")"
"$agg" forensics "$out/timeout" --out="$out/forensics.json" > "$out/forensics.md" ||
  fail "forensics exited $?"
/usr/bin/python3 - "$out/forensics.json" "$sequence" <<'PY' || { cat "$out/forensics.md" >&2; fail "forensics"; }
import json, sys
group = json.load(open(sys.argv[1]))["groups"][0]
assert group["verdict"] == "lagging", group["verdict"]
assert group["diverged_rank"] == 1, group["diverged_rank"]
assert group["diverged_sequence"] == sys.argv[2], (group["diverged_sequence"], sys.argv[2])
assert group["diverged_op"] == "all_reduce"
assert group["missing_ranks"] == [], group["missing_ranks"]
PY
grep -qF "The group waited for rank 1 at all_reduce #$sequence." "$out/forensics.md" ||
  fail "the forensics report does not name rank 1"

expect 1 "launch: heartbeat: no progress for " "${tiny[@]}" \
  --fault=hang:rank=1,step=2,phase=forward --heartbeat_timeout=2s \
  --collective_timeout=30s --out="$out/heartbeat.json"
grep -E "^launch: heartbeat: no progress for [0-9.]+s: rank 1 is in no collective \(step 2, forward\); last completed #[0-9]+ while rank 0 waits in all_reduce #[0-9]+ \(step 2, backward\): the group waits for rank 1; terminated ranks 0, 1; flight recorder dumps in .*$" \
  "$out/stderr" > /dev/null || fail "the launcher did not name rank 1 outside the collective"
! grep -qF "failed after timeout" "$out/stderr" || fail "the collective timeout fired first"

expect 0 "step 3/3 | loss" "${tiny[@]}" --fault=slow:rank=1,ms=500 \
  --heartbeat_timeout=2s --collective_timeout=30s --nomarkdown --out="$out/slow.json"
/usr/bin/python3 - "$out/slow.json" <<'PY' || fail "the slow rank's sleep is not in the step times"
import json, sys
steps = json.load(open(sys.argv[1]))["runs"][0]["steps"]
assert len(steps) == 3
# Every step waits for rank 1's 500 ms: the slowest rank's step time.
assert all(s["step_ms"] >= 500 for s in steps), [s["step_ms"] for s in steps]
PY
echo PASS
