#!/usr/bin/env bash
# The trainer binary's runs end to end: the three output files of a tiny
# 2-rank ddp run and its memory estimate against the measured peak, ranks
# started by hand with torchrun's variables, a companion file that is not the
# run's left alone, an allocation failure inside a step, and a newcomer's
# --steps=1 on the default data.
set -euo pipefail
source trainer/tests/cli_test_lib.sh

# The default: 2 ranks under the launcher, ddp over Gloo.
expect 0 "step 3/3 | loss" "${tiny[@]}" --dropout=0.1 --trace_dir="$out/traces" --out="$out/run.json"
grep -q '^\[rank 1\] ' "$out/stderr" || fail "no rank 1 output"
# One validation pass: the launcher validates, each rank finds the launcher's
# fingerprint and does not validate again.
[[ "$(grep -c 'is the one the launcher validated: not validated again' "$out/stderr")" == 2 ]] \
  || fail "the ranks validated the config again"
grep -q '"world_size": 2' "$out/run.json" || fail "not 2 ranks"
grep -q '"backend": "gloo"' "$out/run.json" || fail "not gloo"
grep -q '"name": "ddp"' "$out/run.json" || fail "not ddp"
grep -q '| grad bytes sent/step (closed form) |' "$out/stdout" || fail "no bytes row"
grep -q '"schema_version": 1' "$out/run.json" || fail "no schema_version"
grep -q '"config_fingerprint": "[0-9a-f]\{64\}"' "$out/run.json" || fail "no fingerprint"
grep -q '"tool": "trainer"' "$out/run.json" || fail "no run context"
grep -q '<svg' "$out/run.svg" || fail "no SVG"
grep -q '^## Summary' "$out/run.md" || fail "no Markdown summary"
grep -q '| final loss |' "$out/stdout" || fail "no summary table on stdout"
# The memory estimate made before the run covers what the run measured, and
# not by much: it counts the same tensors (measured here: 1.07-1.33x the
# peak over the default model, checkpointing, dropout and a longer context).
/usr/bin/python3 - "$out/run.json" <<'PY' || fail "memory estimate vs measured peak"
import json, sys
r = json.load(open(sys.argv[1]))
estimate = int(r["memory_estimate"]["total"])
for m in r["memory"]:
    peak = int(m["peak_bytes"])
    ratio = estimate / peak
    print(f"rank {m.get('rank', 0)}: estimate {estimate} B, measured peak {peak} B, ratio {ratio:.2f}")
    assert 1.0 <= ratio <= 1.6, ratio
PY

# Its traces: one trace-event file per rank with the PyTorch step names,
# phases and collectives, which profiler_agg reads as one run.
/usr/bin/python3 - "$out/traces" <<'PY' || fail "trace files"
import json, sys
for rank in (0, 1):
    t = json.load(open(f"{sys.argv[1]}/rank_{rank}.trace.json"))
    names = {e["name"] for e in t["traceEvents"] if e["ph"] == "X"}
    assert {"ProfilerStep#1", "ProfilerStep#3", "forward", "backward", "optimizer", "data",
            "forward h.0", "backward h.0"} <= names, names
    cats = {e["cat"] for e in t["traceEvents"] if e["ph"] == "X"}
    assert "collective" in cats, cats
    assert t["otherData"]["world_size"] == 2 and t["otherData"]["rank"] == rank
    tracks = {}
    for e in t["traceEvents"]:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["pid"] == rank and (e["tid"] in (0, 1, 2) or e["tid"] >= 10), e
            tracks.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    # Spans on one track nest or are disjoint (what trace viewers draw).
    for tid, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for begin, end, name in spans:
            while open_ends and open_ends[-1] <= begin:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-3, (tid, name, begin, end, open_ends)
            open_ends.append(end)
PY
"$(pwd)/profiler_agg/profiler_agg" "$out/traces" --out="$out/agg.json" > "$out/agg.stdout" 2>&1 \
  || { cat "$out/agg.stdout" >&2; fail "profiler_agg on the run's traces"; }
grep -q '"world_size": 2' "$out/agg.json" || fail "profiler_agg: not 2 ranks"
grep -q '"steps": 3' "$out/agg.json" || fail "profiler_agg: not 3 steps"

# Measured overlap: a model of 1.6 MB of gradients has two buckets (the
# first is capped at 1 MiB), so with overlap the first bucket's all-reduce
# runs during the rest of backward; with --ddp_overlap=false every bucket is
# launched after backward and nothing but a sub-millisecond edge can overlap.
two_buckets=(--vocab_size=64 --d_model=128 --n_layers=2 --n_heads=4 --seq_len=16
             --batch_size=4 --steps=3 --timing_warmup_steps=1 --intra_op_threads=1
             --data=synthetic --nomarkdown)
overlap() {  # DIR -> the overlap ratio profiler_agg measures
  "$(pwd)/profiler_agg/profiler_agg" "$1" --out="$1.json" > /dev/null 2>&1 || fail "profiler_agg $1"
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["overlap_ratio"])' "$1.json"
}
expect 0 "in reverse layout order" "${two_buckets[@]}" --trace_dir="$out/overlap_on" --out="$out/on.json"
grep -q '"buckets"' "$out/on.json" || fail "no buckets in the result"
expect 0 "after backward (--ddp_overlap=false: no overlap)" "${two_buckets[@]}" --ddp_overlap=false \
  --trace_dir="$out/overlap_off" --out="$out/off.json"
# Launching later changes when, not what: the same losses bit for bit.
/usr/bin/python3 -c 'import json,sys; l=[[s["loss"] for s in json.load(open(f))["runs"][0]["steps"]] for f in sys.argv[1:]]; sys.exit(0 if l[0]==l[1] else 1)' \
  "$out/on.json" "$out/off.json" || fail "--ddp_overlap=false changed the losses"
on=$(overlap "$out/overlap_on"); off=$(overlap "$out/overlap_off")
# Per-block spans (trainer/run/block_spans.h) in a real 2-layer run: in every
# step, the forward holds one "forward h.L" per block in layer order and the
# backward one "backward h.L" per block in reverse order, disjoint, nothing
# outside; profiler_agg reports each as a row nested in its phase.
/usr/bin/python3 - "$out/overlap_on" <<'PY' || fail "per-block spans"
import json, sys
for rank in (0, 1):
    t = json.load(open(f"{sys.argv[1]}/rank_{rank}.trace.json"))
    spans = sorted((e for e in t["traceEvents"] if e["ph"] == "X" and e["tid"] == 0),
                   key=lambda e: e["ts"])
    inside = lambda a, b: a["ts"] >= b["ts"] - 1e-3 and a["ts"] + a["dur"] <= b["ts"] + b["dur"] + 1e-3
    steps = [e for e in spans if e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 3, steps
    blocks = [e for e in spans if "block" in e.get("args", {})]
    assert len(blocks) == 3 * 2 * 2, len(blocks)
    for step in steps:
        for phase, order in (("forward", ["0", "1"]), ("backward", ["1", "0"])):
            parent, = [e for e in spans if e["name"] == phase and inside(e, step)]
            mine = [e for e in blocks if inside(e, parent) and e["args"]["parent"] == phase]
            assert [e["args"]["block"] for e in mine] == order, (rank, step["name"], phase, mine)
            assert [e["name"] for e in mine] == [f"{phase} h.{b}" for b in order], mine
            for a, b in zip(mine, mine[1:]):
                assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, (a, b)
r = json.load(open(f"{sys.argv[1]}.json"))
rows = {p["name"]: p for p in r["phases"]}
for name in ("forward h.0", "forward h.1", "backward h.0", "backward h.1"):
    assert rows[name]["parent"] == name.split()[0], rows[name]
    assert 0 < rows[name]["p50_ms"] <= rows[name.split()[0]]["max_ms"], rows[name]
PY
echo "overlap ratio: $on with overlap, $off with --ddp_overlap=false"
/usr/bin/python3 -c "import sys; on, off = $on, $off; sys.exit(0 if on > 0.02 and off < 0.02 and on > off else 1)" \
  || fail "overlap $on (want > 0.02) vs $off with --ddp_overlap=false (want < 0.02)"

# Ranks started by hand with torchrun's variables (as torchrun or Slurm would):
# each process is one rank; rank 0 hosts the store.
# The by-hand run's --out has a Markdown file of the user's beside it: kept.
echo "my notes" > "$out/by_hand.md"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  "$trainer" "${tiny[@]}" --out="$out/by_hand.json" > "$out/rank1.log" 2>&1 &
rank1=$!
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  "$trainer" "${tiny[@]}" --out="$out/by_hand.json" > "$out/rank0.log" 2>&1 \
  || { cat "$out/rank0.log" >&2; fail "rank 0 by hand failed"; }
wait "$rank1" || { cat "$out/rank1.log" >&2; fail "rank 1 by hand failed"; }
grep -q '"world_size": 2' "$out/by_hand.json" || fail "by hand: not 2 ranks"
! grep -q "launch:" "$out/rank0.log" || fail "a rank by hand launched"
[[ "$(cat "$out/by_hand.md")" == "my notes" ]] || fail "the user's by_hand.md was overwritten"
grep -qF "kept $out/by_hand.md: it exists and was not written for $out/by_hand.json" "$out/rank0.log" \
  || { cat "$out/rank0.log" >&2; fail "no line saying by_hand.md was kept"; }
grep -qF "plot: $out/by_hand.svg" "$out/rank0.log" || fail "no plot line"

# An allocation that fails inside a step (here: the logits, 1024 x 128 x
# 8192 fp32 = 4 GiB, beyond a 3 GiB address-space limit) is one line naming
# the step and the operation, exit 1, not an uncaught exception and SIGABRT.
code=0
(ulimit -v $((3 << 20)); exec "$trainer" --nproc=1 --vocab_size=8192 --d_model=32 \
  --n_layers=1 --n_heads=4 --seq_len=128 --batch_size=1024 --steps=1 \
  --intra_op_threads=1 --data=synthetic --nomarkdown --out="$out/oom.json") \
  > "$out/stdout" 2> "$out/stderr" || code=$?
[[ "$code" == 1 ]] || { cat "$out/stderr" >&2; fail "out of memory in a step: exit $code, want 1"; }
grep -qF "rank 0: step 1: forward: out of memory: DefaultCPUAllocator: can't allocate memory" "$out/stderr" \
  || { cat "$out/stderr" >&2; fail "no one-line out-of-memory error"; }
! grep -q "SIGABRT\|terminate called" "$out/stderr" || fail "the allocation failure aborted"

# A newcomer's first smoke test: --steps=1 with the warm-ups left at their
# defaults runs (both shrink and say so), on the default data file, which
# resolves in the runfiles as in the checkout. A --peak_flops far below what
# the run achieves is warned about loudly, never printed as a bare 400%.
expect 0 "data: testdata/gnu_licenses.bin (148391 tokens)" \
  --nproc=1 --d_model=32 --n_layers=1 --seq_len=16 --batch_size=2 --steps=1 \
  --intra_op_threads=1 --peak_flops=1 --nomarkdown --out="$out/default_data.json"
grep -qF -- "--steps=1: the learning-rate warm-up shrinks from its default 10 to 0 steps" "$out/stderr" \
  || fail "no note on the shrunk learning-rate warm-up"
grep -qF -- "--steps=1: the timing warm-up shrinks from its default 2 to 0 steps" "$out/stderr" \
  || fail "no note on the shrunk timing warm-up"
grep -qF "exceeds 100%: the peak it divides by (1e-09 GFLOP/s per rank, --peak_flops)" "$out/stderr" \
  || { cat "$out/stderr" >&2; fail "no loud MFU warning"; }
grep -qF "EXCEEDS 100%: the peak is too low" "$out/stdout" || fail "the MFU row does not say it is wrong"
echo "PASS"
