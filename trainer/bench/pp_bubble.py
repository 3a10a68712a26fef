#!/usr/bin/env python3
"""The pipeline's measured bubble next to its closed form (not a test).

For --pp in {2, 4}, --pp_schedule in {gpipe, 1f1b} and --pp_microbatches in
{1, 2, 4, 8}, runs the trainer (--config=bench) with --trace_dir over the
timed steps, then profiler_agg on the traces, and prints one row per stage:
the measured bubble (idle share of the pipeline's window, docs/pipeline.md
"Figures") next to (p-1)/(m+p-1), and the peak micro-batches in flight next
to GPipe's bound m and 1F1B's min(p-stage, m). The closed form assumes equal
stages and free messages: the last stage's loss and the messages' time are
what the measured figure adds.

Usage (from the checkout; one run at a time, a quiet machine):
  /usr/bin/python3 trainer/bench/pp_bubble.py [--pp=2,4] [--microbatches=1,2,4,8]
      [--schedules=gpipe,1f1b] [--steps=12] [--out=results/pp_bubble.md]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_common import CHECKOUT, build, emit, load_average, provenance


def run(trainer, profiler_agg, pp, schedule, m, args, workdir):
    name = f"pp{pp}_{schedule}_m{m}"
    traces = os.path.join(workdir, name)
    flags = [
        f"--nproc={pp}", f"--pp={pp}", f"--pp_schedule={schedule}",
        f"--pp_microbatches={m}", "--data=synthetic", "--vocab_size=512",
        "--d_model=128", "--n_layers=8", "--n_heads=4", "--seq_len=64",
        "--batch_size=16", f"--steps={args.steps}",
        f"--timing_warmup_steps={args.warmup}", "--intra_op_threads=1",
        "--peak_flops=1e11", "--log_every=100000", "--nomarkdown",
        f"--out={os.path.join(workdir, name + '.json')}",
        f"--trace_dir={traces}",
        f"--trace_steps={args.warmup + 1}:{args.steps}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([trainer] + flags, cwd=CHECKOUT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    out = os.path.join(workdir, name + "_agg.json")
    done = subprocess.run([profiler_agg, traces, f"--out={out}"], cwd=CHECKOUT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"profiler_agg on {name} failed:\n{done.stderr[-3000:]}")
    with open(out) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pp", default="2,4")
    parser.add_argument("--microbatches", default="1,2,4,8")
    parser.add_argument("--schedules", default="gpipe,1f1b")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.steps <= args.warmup:
        parser.error("--steps must exceed --warmup (the traced steps are after it)")
    started = time.time()
    trainer, profiler_agg = build(["//trainer", "//profiler_agg"])
    load_before = load_average()
    lines = ["| pp | schedule | m | stage | window ms | bubble measured | "
             "(p-1)/(m+p-1) | in flight (peak) | GPipe bound m | "
             "1F1B bound min(p-s, m) |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    with tempfile.TemporaryDirectory() as workdir:
        for pp in [int(p) for p in args.pp.split(",")]:
            for schedule in args.schedules.split(","):
                for m in [int(x) for x in args.microbatches.split(",")]:
                    result = run(trainer, profiler_agg, pp, schedule, m, args,
                                 workdir)
                    stages = result.get("pipeline", [])
                    if not stages:
                        sys.exit(f"pp={pp} {schedule} m={m}: no pipeline figures "
                                 f"({result.get('pipeline_note', '')})")
                    for s in stages:
                        lines.append(
                            f"| {pp} | {schedule} | {m} | {s.get('stage', 0)} | "
                            f"{s.get('window_ms', 0):.2f} | "
                            f"{100 * s.get('measured_bubble_fraction', 0):.1f}% | "
                            f"{100 * s.get('closed_form_bubble_fraction', 0):.1f}% | "
                            f"{s.get('peak_in_flight', 0)} | "
                            f"{s.get('gpipe_bound', 0)} | "
                            f"{s.get('one_f_one_b_bound', 0)} |")
                    print(f"pp={pp} {schedule} m={m} done", file=sys.stderr,
                          flush=True)
    lines += ["", (
        f"Tiny GPT (vocab 512, d_model 128, 8 layers, seq 64, batch 16), "
        f"one rank process per stage, 1 intra-op thread, steps "
        f"{args.warmup + 1}-{args.steps} traced; load average {load_before} "
        f"before, {load_average()} after; {provenance(started)}")]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
