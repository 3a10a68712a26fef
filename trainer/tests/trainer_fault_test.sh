#!/usr/bin/env bash
# --fault= in the trainer, real ranks: malformed or out-of-range specs exit 2
# before any rank starts; exit and kill faults end the job naming the rank and
# how it ended; a nan fault stops every rank at that step; a slow rank is
# named the straggler by profiler_agg from the run's traces.
set -euo pipefail
source trainer/tests/cli_test_lib.sh

expect 2 "--fault=kill:rank=1,stp=3,phase=data: 'stp' is not a key of kill" "${tiny[@]}" --fault=kill:rank=1,stp=3,phase=data
expect 2 "--fault=nan:rank=2,step=2: rank 2 is not a rank of the world size 2" "${tiny[@]}" --fault=nan:rank=2,step=2
expect 2 "--fault=nan:rank=0,step=9: step 9 is after the last step 3" "${tiny[@]}" --fault=nan:rank=0,step=9
expect 2 "the run saves no checkpoint (give --checkpoint_dir and --save_every)" "${tiny[@]}" --fault=kill:rank=0,step=2,phase=checkpoint_write
! grep -q "launch:" "$out/stderr" || fail "a bad --fault reached the launcher"

expect 1 "launch: rank 1 (pid" "${tiny[@]}" --fault="exit:rank=1,step=2,code=7" --out="$out/exit.json"
grep -qF ") exited with code 7; terminated rank 0" "$out/stderr" || { cat "$out/stderr" >&2; fail "exit fault"; }
expect 1 "sent by its own --fault=kill injection" "${tiny[@]}" --fault="kill:rank=0,step=2,phase=backward" --out="$out/kill.json"
grep -qF -- "--fault=kill:rank=0,step=2,phase=backward: killing this rank" "$out/stderr" || fail "kill fault not announced"
expect 3 "step 2 of 3: the loss is not finite on rank 1 (nan)" "${tiny[@]}" --fault="nan:rank=1,step=2" --out="$out/nan.json"
[[ ! -e "$out/nan.json" ]] || fail "a failed run wrote a result"

# A rank 50 ms slow at the start of every step arrives last at every step's
# first gradient collective.
expect 0 "step 5/5 | loss" "${tiny[@]}" --steps=5 --fault="slow:rank=1,ms=50" \
  --trace_dir="$out/slow" --nomarkdown --out="$out/slow.json"
"$(pwd)/profiler_agg/profiler_agg" "$out/slow" --out="$out/slow_agg.json" > /dev/null 2>&1 || fail "profiler_agg"
/usr/bin/python3 - "$out/slow_agg.json" <<'PY' || fail "rank 1 is not the straggler"
import json, sys
r = json.load(open(sys.argv[1]))
last = r["last_arrivals"]
print("last arrivals per rank:", last, "of", len(r["arrivals"]))
assert len(r["arrivals"]) == 5 and last[1] >= 0.9 * len(r["arrivals"]), last
PY
echo PASS
