#!/usr/bin/env python3
"""The trainer's communication wait per step over shared memory against Gloo
over loopback TCP, side by side (not a test).

For each strategy (default zero2 and fsdp) runs the trainer (--config=bench)
at 2 ranks on the default model with --transport=tcp and --transport=shm, in
alternating rounds, and prints per strategy and transport the medians over
rounds of the timed steps' means: the gradient collectives' wait
(comm_wait_ms), the parameter gathers' wait under fsdp
(param_gather_wait_ms), the step time and tokens/s, and the ratio tcp / shm of
the total wait. Which transport ran is taken from the ranks' own log line
("collectives over ..."), not from the flag.

Usage (from the checkout; a quiet machine, nothing else running):
  /usr/bin/python3 trainer/bench/transport_wait.py [--strategies=zero2,fsdp]
      [--rounds=3] [--steps=40] [--warmup=5] [--out=results/transport_wait.md]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import CHECKOUT, build, emit, load_average, provenance

TRANSPORTS = ("tcp", "shm")


def run(trainer, strategy, transport, args, workdir, round_index):
    out = os.path.join(workdir, f"{strategy}_{transport}_{round_index}.json")
    flags = [f"--nproc={args.nproc}", f"--strategy={strategy}",
             f"--transport={transport}", "--data=synthetic",
             "--intra_op_threads=1", f"--steps={args.steps}",
             f"--timing_warmup_steps={args.warmup}", "--log_every=100000",
             "--nomarkdown", f"--out={out}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([trainer] + flags, cwd=CHECKOUT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{strategy} over {transport} failed ({done.returncode}):\n"
                 f"{done.stderr[-3000:]}")
    ran = "shm" if "collectives over shm" in done.stderr else (
        "tcp" if "collectives over gloo" in done.stderr else "?")
    if ran != transport:
        sys.exit(f"{strategy}: asked for --transport={transport}, the ranks ran {ran}")
    with open(out) as f:
        result = json.load(f)
    timed = [s for s in result["runs"][0]["steps"] if s.get("timed")]
    mean = lambda key: statistics.fmean(s.get(key, 0.0) for s in timed)
    return {"comm_wait_ms": mean("comm_wait_ms"),
            "param_gather_wait_ms": mean("param_gather_wait_ms"),
            "step_ms": mean("step_ms"),
            "tokens_per_second": result["summary"]["tokens_per_second"]["mean"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategies", default="zero2,fsdp")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.steps <= args.warmup:
        parser.error("--steps must exceed --warmup (the timed steps are after it)")
    if args.rounds < 1 or args.nproc < 2:
        parser.error("--rounds must be at least 1 and --nproc at least 2")
    started = time.time()
    (trainer,) = build(["//trainer"])
    load_before = load_average()
    strategies = args.strategies.split(",")
    measured = {(s, t): [] for s in strategies for t in TRANSPORTS}
    with tempfile.TemporaryDirectory() as workdir:
        for round_index in range(args.rounds):
            for strategy in strategies:
                # Alternate which transport goes first from round to round.
                order = TRANSPORTS if round_index % 2 == 0 else TRANSPORTS[::-1]
                for transport in order:
                    measured[(strategy, transport)].append(
                        run(trainer, strategy, transport, args, workdir, round_index))
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr,
                  flush=True)
    median = lambda rows, key: statistics.median(r[key] for r in rows)
    lines = ["| strategy | transport | comm wait ms/step | param gather wait ms/step | "
             "total wait ms/step (range) | step ms | tokens/s | total wait tcp / shm |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for strategy in strategies:
        totals = {t: [r["comm_wait_ms"] + r["param_gather_wait_ms"]
                      for r in measured[(strategy, t)]] for t in TRANSPORTS}
        for transport in TRANSPORTS:
            rows = measured[(strategy, transport)]
            total = totals[transport]
            ratio = (f"{statistics.median(totals['tcp']) / statistics.median(totals['shm']):.1f}x"
                     if transport == "shm" and statistics.median(totals["shm"]) > 0 else "")
            lines.append(
                f"| {strategy} | {transport} | {median(rows, 'comm_wait_ms'):.3f} | "
                f"{median(rows, 'param_gather_wait_ms'):.3f} | "
                f"{statistics.median(total):.3f} ({min(total):.3f}-{max(total):.3f}) | "
                f"{median(rows, 'step_ms'):.1f} | {median(rows, 'tokens_per_second'):.0f} | "
                f"{ratio} |")
    lines += ["", (
        f"{args.nproc} rank processes on this host, the trainer's default model, "
        f"synthetic data, 1 intra-op thread, steps {args.warmup + 1}-{args.steps} "
        f"timed; medians over {args.rounds} alternating rounds of each run's mean "
        f"over its timed steps; load average {load_before} before, "
        f"{load_average()} after; {provenance(started)}")]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
