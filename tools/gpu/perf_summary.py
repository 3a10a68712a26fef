#!/usr/bin/env python3
"""tools/gpu/check.sh's perf check, summarised: reads OUT_DIR/perf_{ours,eager,
compile}_R.json (R = 1..ROUNDS) and perf_ours_R.log, writes OUT_DIR/perf.json
and prints check.sh's lines (record's words: STATE NAME DETAILS):

  PASS|FAIL perf       our runs finished with finite losses in every round;
  SKIP perf_eager / perf_compile   the PyTorch peer did not run in any round
                       (its log's last line): nothing to compare with;
  GOAL compile_ratio   met|missed: our tokens/s over torch.compile's >= 1.0;
  GOAL eager_ratio     reported: over eager PyTorch's (no goal);
  GOAL mfu             met|missed: MFU >= 40% of the measured bf16 peak;
  GOAL alloc           met|missed: no device memory allocated after step 1.

A run's tokens/s is the median over its timed steps; a side's is the median
over the rounds of those (check.sh alternates ours, eager and compile in each
round). MFU = the model's FLOPs per token (the trainer's count: 6 N plus the
attention) x tokens/s / the cuBLASLt bf16 peak trainer_cuda measured at the
start of the same run. Standard library only.

  perf_summary.py OUT_DIR ROUNDS
"""

import json
import math
import os
import re
import statistics
import sys

COMPILE_GOAL = 1.0
MFU_GOAL = 0.40
ALLOC_LINE = re.compile(r"device memory allocated after step 1: (-?\d+) bytes")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def last_line(path):
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
        return lines[-1] if lines else "empty log"
    except OSError:
        return "no log"


def ours_round(out, r):
    """One trainer_cuda run: its tokens/s, MFU, peak, allocation; or why not."""
    result = load(os.path.join(out, f"perf_ours_{r}.json"))
    if result is None:
        return None, f"round {r}: no result ({last_line(os.path.join(out, f'perf_ours_{r}.log'))})"
    steps = result.get("runs", [{}])[0].get("steps", [])
    losses = [s.get("loss", float("nan")) for s in steps]
    if not steps or not all(math.isfinite(l) for l in losses):
        return None, f"round {r}: losses not finite ({losses[:3]}...)"
    timed = [s for s in steps if s.get("timed", False)]
    if not timed:
        return None, f"round {r}: no timed step"
    tps = statistics.median(s.get("tokens_per_second", 0.0) for s in timed)
    peak = result.get("peak_flops", {}).get("rank_flops_per_second", 0.0)
    flops_per_token = result.get("model", {}).get("flops_per_token", 0.0)
    alloc = None
    try:
        with open(os.path.join(out, f"perf_ours_{r}.log")) as f:
            found = ALLOC_LINE.findall(f.read())
        alloc = int(found[-1]) if found else None
    except OSError:
        pass
    phase = lambda key: statistics.median(s.get(key, 0.0) for s in timed)
    return {
        "round": r, "tokens_per_second": tps, "peak_flops": peak,
        "peak_source": result.get("peak_flops", {}).get("source", ""),
        "flops_per_token": flops_per_token,
        "mfu": flops_per_token * tps / peak if peak > 0 else None,
        "bytes_allocated_after_step1": alloc,
        "first_loss": losses[0], "last_loss": losses[-1],
        "step_ms": phase("step_ms"), "forward_ms": phase("forward_ms"),
        "backward_ms": phase("backward_ms"), "optimizer_ms": phase("optimizer_ms"),
        "device_bytes": steps[-1].get("peak_memory_bytes", 0),
    }, None


def peer_round(out, mode, r):
    result = load(os.path.join(out, f"perf_{mode}_{r}.json"))
    if result is None or "median_tokens_per_second" not in result:
        return None
    return {"round": r, "tokens_per_second": result["median_tokens_per_second"],
            "torch_version": result.get("torch_version", ""),
            "fused_adamw": result.get("fused_adamw"), "attention": result.get("attention"),
            "max_memory_allocated_bytes": result.get("max_memory_allocated_bytes", 0)}


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    out, rounds = argv[1], int(argv[2])
    ours, problems = [], []
    for r in range(1, rounds + 1):
        one, why = ours_round(out, r)
        if one is None:
            problems.append(why)
        else:
            ours.append(one)
    peers = {mode: [p for p in (peer_round(out, mode, r) for r in range(1, rounds + 1)) if p]
             for mode in ("eager", "compile")}
    summary = {"rounds": rounds, "ours": ours, "eager": peers["eager"],
               "compile": peers["compile"], "goals": {}}
    lines = []
    if problems or not ours:
        lines.append("FAIL perf " + "; ".join(problems or ["no run of ours"]))
    else:
        lines.append(f"PASS perf {len(ours)} rounds of ours finished with finite losses "
                     f"(round 1 {ours[0]['first_loss']:.4f}->{ours[0]['last_loss']:.4f})")
    med = lambda runs, key: statistics.median(x[key] for x in runs) if runs else None
    ours_tps = med(ours, "tokens_per_second")
    summary["ours_tokens_per_second"] = ours_tps
    for mode in ("eager", "compile"):
        if not peers[mode]:
            lines.append(f"SKIP perf_{mode} the PyTorch peer did not run "
                         f"(perf_{mode}_1.log: {last_line(os.path.join(out, f'perf_{mode}_1.log'))})")
            continue
        peer_tps = med(peers[mode], "tokens_per_second")
        summary[f"{mode}_tokens_per_second"] = peer_tps
        if ours_tps is None:
            continue
        ratio = ours_tps / peer_tps
        summary[f"{mode}_ratio"] = ratio
        what = (f"ours/torch.{'compile' if mode == 'compile' else 'eager'}={ratio:.3f}x "
                f"(ours {ours_tps:.0f} tokens/s, {mode} {peer_tps:.0f}; medians of "
                f"{len(ours)}/{len(peers[mode])} rounds)")
        if mode == "compile":
            met = ratio >= COMPILE_GOAL
            summary["goals"]["compile_ratio"] = {"met": met, "observed": ratio,
                                                 "goal": COMPILE_GOAL}
            lines.append(f"GOAL compile_ratio {'met' if met else 'missed'}: {what} "
                         f"goal >= {COMPILE_GOAL}x")
        else:
            lines.append(f"GOAL eager_ratio reported: {what} (no goal)")
    mfus = [x["mfu"] for x in ours if x["mfu"] is not None]
    if mfus:
        mfu = statistics.median(mfus)
        peak = med(ours, "peak_flops")
        met = mfu >= MFU_GOAL
        summary["mfu"] = mfu
        summary["peak_flops"] = peak
        summary["goals"]["mfu"] = {"met": met, "observed": mfu, "goal": MFU_GOAL}
        lines.append(f"GOAL mfu {'met' if met else 'missed'}: MFU {100 * mfu:.1f}% of the "
                     f"measured cuBLASLt bf16 peak ({peak / 1e12:.0f} TFLOP/s, median of "
                     f"{len(mfus)} rounds) goal >= {100 * MFU_GOAL:.0f}%")
    allocs = [x["bytes_allocated_after_step1"] for x in ours]
    if ours:
        known = [a for a in allocs if a is not None and a >= 0]
        met = len(known) == len(allocs) and all(a == 0 for a in known)
        worst = max(known) if known else None
        summary["goals"]["alloc"] = {"met": met, "observed": worst, "goal": 0}
        lines.append(f"GOAL alloc {'met' if met else 'missed'}: "
                     + (f"{worst} bytes of device memory allocated after step 1 at most "
                        f"({len(known)} of {len(allocs)} rounds read)" if known
                        else "trainer_cuda reported no allocation line")
                     + " goal 0")
    if ours:
        summary["where_the_time_goes_ms"] = {
            k: med(ours, k) for k in ("step_ms", "forward_ms", "backward_ms", "optimizer_ms")}
    with open(os.path.join(out, "perf.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
