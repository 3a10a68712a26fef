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
code=0; "$comm_bench" --trace_dir=/proc/nope --ops=all_reduce > /dev/null 2> "$out/err" || code=$?
[[ "$code" == 2 ]] && grep -qF -- "--trace_dir=/proc/nope/rank_0.trace.json: cannot write there" "$out/err" || fail "bad --trace_dir"
echo PASS
