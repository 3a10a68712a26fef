#!/usr/bin/env python3
"""Where a training step's CPU time goes, ours against PyTorch DDP (not a test).

For one configuration of the DDP benchmark (ddp_bench.py: same model, batch,
threads, synthetic data), runs our trainer (--config=bench) and ddp_peer.py
under `perf record -e cpu-clock` (software clock sampling: this machine
exposes no hardware counters), every rank process included, at two step
counts, and prints CPU milliseconds per step by shared object. The difference
between the two runs divided by the difference in steps removes start-up
(dynamic linking, Python's imports, model creation), so what is left is the
steady-state step: GEMM in oneDNN (libdnnl; --gemm=onednn) or OpenBLAS
(--gemm=blas), LibTorch's kernels and dispatcher, Python, the kernel
(scheduling, page faults), ...

Usage (from the checkout):
  /usr/bin/python3 trainer/bench/step_profile.py [--model=tiny]
      [--precision=fp32] [--world=2] [--steps=60,300] [--gemm=onednn]
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ddp_bench  # noqa: E402

SAMPLE_HZ = 1000  # cpu-clock samples per CPU-second: 1 sample = 1 ms


def perf_by_dso(command, data, env):
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F",
                    str(SAMPLE_HZ), "-o", data, "--"] + command,
                   env=env, check=True, capture_output=True,
                   cwd=ddp_bench.CHECKOUT)
    report = subprocess.run(
        ["perf", "report", "-i", data, "--no-children", "--sort", "dso",
         "-g", "none", "--stdio", "-n"], capture_output=True, text=True,
        check=True).stdout
    samples = collections.Counter()
    for line in report.splitlines():
        match = re.match(r"\s*[\d.]+%\s+(\d+)\s+(.+?)\s*$", line)
        if match:
            name = match.group(2)
            if name.startswith("[JIT]"):
                name = "[JIT] (oneDNN/LibTorch generated code)"
            samples[name] += int(match.group(1))
    return samples


def commands(binary, model, precision, world, steps, workdir, gemm):
    shape = dict(ddp_bench.MODELS[model], steps=steps, timing_warmup_steps=1)
    ours = [binary] + [f"--{k}={v}" for k, v in shape.items()] + [
        "--data=synthetic", f"--batch_size={ddp_bench.BATCH}",
        f"--precision={precision}", f"--nproc={world}",
        "--intra_op_threads=1", "--strategy=ddp", "--peak_flops=1e11",
        f"--gemm={gemm}",
        "--log_every=100000", "--nomarkdown",
        f"--out={os.path.join(workdir, 'ours.json')}"]
    theirs = [ddp_bench.PYTHON, os.path.join(HERE, "ddp_peer.py")] + [
        f"--{k}={v}" for k, v in shape.items()] + [
        f"--batch_size={ddp_bench.BATCH}", f"--precision={precision}",
        f"--world_size={world}"]
    return ours, theirs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--steps", default="60,300")
    parser.add_argument("--gemm", default="onednn")
    args = parser.parse_args()
    short, long = (int(s) for s in args.steps.split(","))
    binary = ddp_bench.build_ours()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    per_step = {}
    with tempfile.TemporaryDirectory() as workdir:
        for side in ("ours", "PyTorch"):
            counts = []
            for steps in (short, long):
                ours, theirs = commands(binary, args.model, args.precision,
                                        args.world, steps, workdir,
                                        args.gemm)
                counts.append(perf_by_dso(
                    ours if side == "ours" else theirs,
                    os.path.join(workdir, f"{side}_{steps}.data"), env))
            per_step[side] = {
                dso: (counts[1][dso] - counts[0][dso]) / (long - short) *
                1000 / SAMPLE_HZ
                for dso in set(counts[0]) | set(counts[1])}
    dsos = sorted(set(per_step["ours"]) | set(per_step["PyTorch"]),
                  key=lambda d: -max(per_step["ours"].get(d, 0),
                                     per_step["PyTorch"].get(d, 0)))
    lines = [f"CPU ms per step, all {args.world} rank process(es) together "
             f"({args.model}, {args.precision}, ours --gemm={args.gemm}; "
             f"runs of {short} and {long} "
             "steps, their difference):", "",
             "| shared object | ours | PyTorch |", "| --- | ---: | ---: |"]
    for dso in dsos:
        ours = per_step["ours"].get(dso, 0)
        theirs = per_step["PyTorch"].get(dso, 0)
        if max(abs(ours), abs(theirs)) < 0.05:
            continue
        lines.append(f"| {dso} | {ours:.2f} | {theirs:.2f} |")
    lines.append(f"| **total** | {sum(per_step['ours'].values()):.2f} | "
                 f"{sum(per_step['PyTorch'].values()):.2f} |")
    lines.append("")
    lines.append(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
