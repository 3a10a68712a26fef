#!/usr/bin/env bash
# comm_bench --trace_dir: each rank's trace has a ProfilerStep#N per sweep
# point and its collectives, and profiler_agg reads them as one run.
set -euo pipefail
comm_bench="$(pwd)/comm_bench/comm_bench"
agg="$(pwd)/profiler_agg/profiler_agg"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$comm_bench" --nproc=2 --ops=all_reduce --minbytes=1K --maxbytes=4K --iters=2 \
  --warmup_iters=1 --trace_dir="$out/traces" --out="$out/r.json" > "$out/log" 2>&1 \
  || { cat "$out/log" >&2; fail "comm_bench"; }
/usr/bin/python3 - "$out/traces" <<'PY' || fail "trace files"
import json, sys
for rank in (0, 1):
    t = json.load(open(f"{sys.argv[1]}/rank_{rank}.trace.json"))
    steps = sorted(e["name"] for e in t["traceEvents"] if e.get("cat") == "step")
    assert steps == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"], steps
    assert any(e.get("cat") == "collective" and e["name"] == "all_reduce" for e in t["traceEvents"])
    assert t["otherData"]["tool"] == "comm_bench"
PY
"$agg" "$out/traces" --out="$out/agg.json" > "$out/agg.log" 2>&1 || { cat "$out/agg.log" >&2; fail "profiler_agg"; }
grep -q '"steps": 3' "$out/agg.json" || fail "profiler_agg: not 3 points"
# --trace_steps=2:3 of 4 points (sizes 1K..8K): exactly steps 2 and 3, and
# every collective of the traced ranks inside one of them (points 1 and 4
# ran theirs with the recorder disabled).
"$comm_bench" --nproc=2 --ops=all_reduce --minbytes=1K --maxbytes=8K --iters=2 \
  --warmup_iters=1 --trace_dir="$out/window" --trace_steps=2:3 --out="$out/w.json" \
  > "$out/wlog" 2>&1 || { cat "$out/wlog" >&2; fail "comm_bench --trace_steps"; }
/usr/bin/python3 - "$out/window" <<'PY' || fail "windowed trace files"
import json, sys
for rank in (0, 1):
    t = json.load(open(f"{sys.argv[1]}/rank_{rank}.trace.json"))
    steps = {e["name"]: e for e in t["traceEvents"] if e.get("cat") == "step"}
    assert sorted(steps) == ["ProfilerStep#2", "ProfilerStep#3"], sorted(steps)
    assert steps["ProfilerStep#2"]["args"]["bytes"] == "2048", steps["ProfilerStep#2"]
    colls = [e for e in t["traceEvents"] if e.get("cat") == "collective"]
    # Each point: warm-up + 2 timed + a check, out of place and in place.
    assert len(colls) >= 2 * 2 * 3, len(colls)
    for c in colls:
        assert any(s["ts"] <= c["ts"] <= s["ts"] + s["dur"] for s in steps.values()), c
PY
expect_usage() {  # MESSAGE FLAGS... -> exit 2 and MESSAGE on stderr, no rank started
  local message="$1"; shift
  local code=0
  "$comm_bench" --ops=all_reduce --minbytes=1K --maxbytes=8K "$@" > /dev/null 2> "$out/err" || code=$?
  [[ "$code" == 2 ]] && grep -qF -- "$message" "$out/err" || { cat "$out/err" >&2; fail "$* (exit $code)"; }
  ! grep -q "launch:" "$out/err" || fail "$*: a rank started"
}
expect_usage "--trace_steps=3:5 must be A:B with 1 <= A <= B <= 4 (the sweep's points)" \
  --trace_dir="$out/x" --trace_steps=3:5
expect_usage "--trace_steps needs --trace_dir" --trace_steps=1:1
code=0; "$comm_bench" --trace_dir=/proc/nope --ops=all_reduce > /dev/null 2> "$out/err" || code=$?
[[ "$code" == 2 ]] && grep -qF -- "--trace_dir=/proc/nope/rank_0.trace.json: cannot write there" "$out/err" || fail "bad --trace_dir"
echo PASS
