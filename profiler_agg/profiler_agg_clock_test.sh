#!/usr/bin/env bash
# Clocks that differ between hosts, on one host: a 2-rank trainer run whose
# rank 1 clock reads 1 s ahead (--test_only_shift_clock_of_rank=1, which its
# trace's start time and its clock offset estimate both see). profiler_agg's
# merged trace must still put each collective's end at the same instant on
# both ranks (a collective ends together everywhere), within the offset
# estimate's error bound (half its round trip) plus the transport's own
# end-to-end skew; adding the offset to the raw ts alone would be a second
# off.
set -euo pipefail
trainer="$(pwd)/trainer/trainer"
agg="$(pwd)/profiler_agg/profiler_agg"
out="$TEST_TMPDIR/out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$trainer" --nproc=2 --vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 --seq_len=16 \
  --batch_size=4 --steps=4 --intra_op_threads=1 --data=synthetic --peak_flops=1e10 \
  --nomarkdown --trace_dir="$out/trace" --test_only_shift_clock_of_rank=1 \
  --out="$out/run.json" > "$out/run.out" 2> "$out/run.err" ||
  { cat "$out/run.err" >&2; fail "the trainer run failed"; }
"$agg" "$out/trace" --out="$out/agg.json" > "$out/agg.out" 2> "$out/agg.err" ||
  { cat "$out/agg.err" >&2; fail "profiler_agg failed"; }
/usr/bin/python3 - "$out/trace" "$out/agg.merged.trace.json" <<'PY' || fail "the merged trace does not align"
import json, statistics, sys
raw = {r: json.load(open("%s/rank_%d.trace.json" % (sys.argv[1], r))) for r in (0, 1)}
info = raw[1]["otherData"]
offset, rtt = info["clock_offset_us"], info["clock_sync_rtt_us"]
# The shift is real: rank 1's clock reads ~1 s ahead of rank 0's.
assert abs(offset + 1e6) < 1e5, offset

def ends(events, pid):
    return {e["args"]["seq"]: e["ts"] + e["dur"] for e in events
            if e.get("ph") == "X" and e.get("cat") == "collective" and e["pid"] == pid}

merged = json.load(open(sys.argv[2]))["traceEvents"]
e0, e1 = ends(merged, 0), ends(merged, 1)
common = sorted(set(e0) & set(e1))
assert len(common) >= 4, common
skew = statistics.median(abs(e0[s] - e1[s]) for s in common)
# Half the estimate's round trip, plus 50 ms for when each rank's transport
# reports the end (loopback under load).
bound = rtt / 2 + 50e3
print("median end skew %.0f us, offset %.0f us, rtt %.0f us, bound %.0f us" % (skew, offset, rtt, bound))
assert skew <= bound, (skew, bound)
# The old reading (offset added to the raw ts) is a second off: the check
# above would catch it.
r0, r1 = ends(raw[0]["traceEvents"], 0), ends(raw[1]["traceEvents"], 1)
naive = statistics.median(abs(r0[s] - (r1[s] + offset)) for s in common)
assert naive > 0.5e6, naive
PY
echo PASS
