#!/usr/bin/env python3
"""What tracing costs the trainer: no --trace_dir vs a disabled recorder vs on.

Three variants of the same 2-rank DDP run (built with --config=bench, -c opt),
alternating within each round (the order rotates from round to round, so no
variant always runs first after a quiet or a busy moment):

  off       no --trace_dir: no recorder exists; every span site tests one
            null pointer (common/trace/recorder.h).
  disabled  --trace_dir with --trace_steps=1:1: the recorder and the
            collective-log observer exist for the whole run, but every timed
            step (after --timing_warmup_steps) runs with the recorder
            disabled and no trace pointer in the trainer; the observer still
            fires on every collective and drops it.
  on        --trace_dir, every step traced: ProfilerStep#N, data, forward,
            backward, optimizer, every bucket all-reduce and its wait.

Per run: the median step time of rank 0's timed steps (step_ms). Per variant:
the median over rounds and the range; per round, the ratio to `off` of the
same round, and the median and range of those ratios. The host load average
is printed before and after, since other work on the machine moves every
figure more than tracing does.

Usage (from the checkout):
  /usr/bin/python3 trainer/bench/trace_overhead.py [--rounds=7] [--steps=60]
      [--bucket_cap_mb=0.05] [--out=results/trace_overhead.md]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from ddp_bench import build_ours  # bazel build --config=bench //trainer

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
VARIANTS = ("off", "disabled", "on")


def run(binary, variant, args, workdir, index):
    out = os.path.join(workdir, f"{variant}_{index}.json")
    flags = [
        "--nproc=2", "--strategy=ddp", "--data=synthetic", "--vocab_size=512",
        "--d_model=128", "--n_layers=2", "--n_heads=4", "--seq_len=64",
        "--batch_size=8", f"--steps={args.steps}",
        f"--timing_warmup_steps={args.warmup}", "--intra_op_threads=1",
        f"--bucket_cap_mb={args.bucket_cap_mb}", "--peak_flops=1e11",
        "--log_every=100000", "--nomarkdown", f"--out={out}"]
    traces = os.path.join(workdir, f"traces_{variant}_{index}")
    if variant == "disabled":
        flags += [f"--trace_dir={traces}", "--trace_steps=1:1"]
    elif variant == "on":
        flags += [f"--trace_dir={traces}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([binary] + flags, cwd=CHECKOUT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{variant} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(out) as f:
        result = json.load(f)
    steps = [s["step_ms"] for s in result["runs"][0]["steps"] if s.get("timed")]
    collectives = None
    if variant != "off":
        with open(os.path.join(traces, "rank_0.trace.json")) as f:
            events = json.load(f)["traceEvents"]
        collectives = sum(1 for e in events if e.get("cat") == "collective")
    return {"step_ms": statistics.median(steps),
            "buckets": len(result["strategy"]["buckets"]),
            "build": result["run_context"]["build_mode"],
            "traced_collectives": collectives}


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--bucket_cap_mb", default="0.05",
                        help="small buckets: many collectives per step, so "
                             "the observer's cost shows if it has one")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.rounds < 3:
        sys.exit("--rounds must be >= 3")
    binary = build_ours()
    load_before = load_average()
    results = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as workdir:
        for round_ in range(args.rounds):
            order = VARIANTS[round_ % 3:] + VARIANTS[:round_ % 3]
            for variant in order:
                results[variant].append(run(binary, variant, args, workdir, round_))
            print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(
                f"{v} {results[v][-1]['step_ms']:.2f} ms" for v in VARIANTS),
                file=sys.stderr, flush=True)
    load_after = load_average()
    off = [r["step_ms"] for r in results["off"]]
    lines = ["| variant | step ms (median of rounds) | range | ratio to off "
             "(median of per-round ratios) | ratio range |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for variant in VARIANTS:
        times = [r["step_ms"] for r in results[variant]]
        ratios = sorted(t / o for t, o in zip(times, off))
        lines.append(f"| {variant} | {statistics.median(times):.2f} | "
                     f"{min(times):.2f}–{max(times):.2f} | "
                     f"{statistics.median(ratios):.3f} | "
                     f"{ratios[0]:.3f}–{ratios[-1]:.3f} |")
    first = results["on"][0]
    lines += ["", (
        f"{args.rounds} alternating rounds; 2 ranks, ddp, tiny GPT (vocab 512, "
        f"d_model 128, 2 layers, seq 64, batch 8 per rank), {first['buckets']} "
        f"buckets (--bucket_cap_mb={args.bucket_cap_mb}), {args.steps} steps of "
        f"which {args.steps - args.warmup} timed; {first['build']} build; "
        f"rank 0's trace with every step on held {first['traced_collectives']} "
        f"collective spans; load average {load_before} before, {load_after} "
        "after.")]
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
