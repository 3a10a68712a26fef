#!/usr/bin/env bash
# moe_comm --trace_dir: each rank's trace has a ProfilerStep#N per
# configuration in --trace_steps' window (benchmark points and checks alike)
# and every collective those configurations ran, none from outside it; and
# profiler_agg reads the files as one run. Bad tracing flags stop the run
# before any rank starts (exit 2, one line).
set -euo pipefail
moe_comm="$(pwd)/moe_comm/moe_comm"
agg="$(pwd)/profiler_agg/profiler_agg"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny=(--nproc=2 --tokens_per_rank=32 --hidden=16 --iters=2 --warmup_iters=1)

# Benchmark: 3 configurations, only 2..3 traced.
"$moe_comm" "${tiny[@]}" --skew=uniform,zipf:1,zipf:2 --trace_dir="$out/bench" \
  --trace_steps=2:3 --out="$out/bench.json" > "$out/bench.log" 2>&1 \
  || { cat "$out/bench.log" >&2; fail "moe_comm benchmark"; }
# --check: 2 configurations, all traced.
"$moe_comm" "${tiny[@]}" --check --skew=uniform,zipf:1 --trace_dir="$out/check" \
  --out="$out/check.json" > "$out/check.log" 2>&1 \
  || { cat "$out/check.log" >&2; fail "moe_comm --check"; }
/usr/bin/python3 - "$out" <<'PY' || fail "trace files"
import json, sys
def check(directory, expected_steps, mode):
    run_ids = set()
    for rank in (0, 1):
        t = json.load(open(f"{sys.argv[1]}/{directory}/rank_{rank}.trace.json"))
        events = [e for e in t["traceEvents"] if e.get("ph") == "X"]
        steps = sorted((e for e in events if e["cat"] == "step"), key=lambda e: e["ts"])
        assert [e["name"] for e in steps] == expected_steps, [e["name"] for e in steps]
        assert all(e["args"]["mode"] == mode for e in steps), steps
        collectives = [e for e in events if e["cat"] == "collective"]
        ops = {e["name"] for e in collectives}
        # routing statistics, the counts exchange, dispatch and combine
        assert {"all_reduce", "all_to_all", "all_to_allv"} <= ops, ops
        # Every collective inside a traced configuration: none from outside
        # the window (configuration 1 of the benchmark is not traced).
        for c in collectives:
            assert any(s["ts"] <= c["ts"] and c["ts"] + c["dur"] <= s["ts"] + s["dur"] + 1
                       for s in steps), (c, steps)
        assert t["otherData"]["tool"] == "moe_comm"
        run_ids.add(t["otherData"]["run_id"])
    assert len(run_ids) == 1, run_ids
check("bench", ["ProfilerStep#2", "ProfilerStep#3"], "benchmark")
check("check", ["ProfilerStep#1", "ProfilerStep#2"], "check")
PY
"$agg" "$out/bench" --out="$out/agg.json" > "$out/agg.log" 2>&1 \
  || { cat "$out/agg.log" >&2; fail "profiler_agg"; }
grep -q '"steps": 2' "$out/agg.json" || fail "profiler_agg: not 2 configurations"

expect_usage() {  # expect_usage MESSAGE ARGS...: exit 2 and MESSAGE on stderr
  local message="$1"; shift
  local code=0
  "$moe_comm" "$@" > /dev/null 2> "$out/err" || code=$?
  [[ "$code" == 2 ]] && grep -qF -- "$message" "$out/err" \
    || { cat "$out/err" >&2; fail "$* (exit $code)"; }
  # Nothing started: no rank logged anything.
  ! grep -q "rank 0" "$out/err" || fail "$*: a rank started"
}
expect_usage "--trace_dir=/proc/nope/rank_0.trace.json: cannot write there" \
  --trace_dir=/proc/nope
expect_usage "--trace_steps=2:4 must be A:B with 1 <= A <= B <= 3 (the sweep's configurations)" \
  --skew=uniform,zipf:1,zipf:2 --trace_dir="$out/x" --trace_steps=2:4
expect_usage "--trace_steps needs --trace_dir" --skew=uniform --trace_steps=1:1
echo PASS
