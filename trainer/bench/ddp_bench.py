#!/usr/bin/env python3
"""DDP throughput: our trainer against PyTorch's own DDP, same everything.

Builds //trainer with --config=bench (-c opt), then for each model (tiny:
vocab 512, d_model 128, 2 layers, 4 heads, seq 64; small: vocab 4096, d_model
256, 4 layers, 4 heads, seq 128; batch 8 per rank), precision (fp32, bf16)
and world size (1, 2) runs ours and ddp_peer.py (torch DDP over gloo) in
alternation, --rounds times (>= 3), one intra-op thread per rank, synthetic
data, dropout 0, AdamW with the same weight-decay groups, clipping at 1.0.
Both sides load the same LibTorch, oneDNN and BLAS (printed). Tokens/s is the
timed steps' global tokens / the slowest rank's step time on both sides.

Prints a Markdown table: median tokens/s of each side and the median of the
per-round ratios ours / PyTorch, plus our per-phase times (forward, backward,
optimizer incl. the wait for bucket all-reduces, comm wait) so that a missed
goal can be explained. Goals (issue 6): >= 1.2x on tiny, >= 1.0x on small.

Usage (from the checkout):
  /usr/bin/python3 trainer/bench/ddp_bench.py [--rounds=3] [--models=tiny,small]
      [--precisions=fp32,bf16] [--worlds=1,2] [--out=results/ddp_bench.md]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch

MODELS = {
    "tiny": dict(vocab_size=512, d_model=128, n_layers=2, n_heads=4,
                 seq_len=64, steps=40, timing_warmup_steps=8),
    "small": dict(vocab_size=4096, d_model=256, n_layers=4, n_heads=4,
                  seq_len=128, steps=14, timing_warmup_steps=4),
}
BATCH = 8


def build_ours():
    subprocess.run(["bazel", "build", "--config=bench", "//trainer"],
                   cwd=CHECKOUT, check=True)
    bin_dir = subprocess.run(
        ["bazel", "info", "--config=bench", "bazel-bin"], cwd=CHECKOUT,
        check=True, capture_output=True, text=True).stdout.strip()
    return os.path.join(bin_dir, "trainer", "trainer")


def run_ours(binary, model, precision, world, workdir):
    shape = MODELS[model]
    out = os.path.join(workdir, f"ours_{model}_{precision}_{world}.json")
    flags = [f"--{k}={v}" for k, v in shape.items()] + [
        "--data=synthetic", f"--batch_size={BATCH}", f"--precision={precision}",
        f"--nproc={world}", "--intra_op_threads=1", "--strategy=ddp",
        "--peak_flops=1e11", "--log_every=100000", "--nomarkdown",
        f"--out={out}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([binary] + flags, cwd=CHECKOUT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"ours failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(out) as f:
        result = json.load(f)
    steps = [s for s in result["runs"][0]["steps"] if s["timed"]]
    phases = {k: statistics.mean(s[k] for s in steps)
              for k in ("forward_ms", "backward_ms", "optimizer_ms",
                        "comm_wait_ms", "step_ms")}
    return {"tokens_per_second": result["summary"]["tokens_per_second"]["mean"],
            "phases": phases,
            "blas": result["run_context"]["blas_library"],
            "libtorch": result["run_context"]["libtorch_version"],
            "buckets": len(result["strategy"]["buckets"]),
            "build": result["run_context"]["build_mode"]}


def run_theirs(model, precision, world):
    shape = MODELS[model]
    flags = [f"--{k}={v}" for k, v in shape.items()] + [
        f"--batch_size={BATCH}", f"--precision={precision}",
        f"--world_size={world}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([PYTHON, os.path.join(HERE, "ddp_peer.py")] + flags,
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"ddp_peer.py failed ({done.returncode}):\n"
                 f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="tiny,small")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--worlds", default="1,2")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.rounds < 1:
        sys.exit("--rounds must be >= 1 (the benchmark asks for >= 3)")
    binary = build_ours()
    rows = []
    facts = {}
    with tempfile.TemporaryDirectory() as workdir:
        for model in args.models.split(","):
            for precision in args.precisions.split(","):
                for world in [int(w) for w in args.worlds.split(",")]:
                    ours, theirs = [], []
                    for round_ in range(args.rounds):
                        ours.append(run_ours(binary, model, precision, world,
                                             workdir))
                        theirs.append(run_theirs(model, precision, world))
                        print(f"{model} {precision} world {world} round "
                              f"{round_ + 1}: ours "
                              f"{ours[-1]['tokens_per_second']:.0f} tok/s, "
                              f"PyTorch {theirs[-1]['tokens_per_second']:.0f}",
                              flush=True)
                    facts.update(blas_ours=ours[0]["blas"],
                                 blas_theirs=theirs[0]["blas"],
                                 libtorch=ours[0]["libtorch"],
                                 torch=theirs[0]["torch"],
                                 build=ours[0]["build"],
                                 foreach=theirs[0]["adamw_foreach"])
                    ratios = [o["tokens_per_second"] / t["tokens_per_second"]
                              for o, t in zip(ours, theirs)]
                    phases = {k: statistics.median(o["phases"][k] for o in ours)
                              for k in ours[0]["phases"]}
                    rows.append((model, precision, world,
                                 statistics.median(o["tokens_per_second"]
                                                   for o in ours),
                                 statistics.median(t["tokens_per_second"]
                                                   for t in theirs),
                                 statistics.median(ratios), min(ratios),
                                 max(ratios), ours[0]["buckets"], phases))
    lines = [
        "| model | precision | ranks | ours tok/s | PyTorch DDP tok/s | "
        "ratio (median) | ratio range | our fwd / bwd / opt / comm-wait ms | "
        "buckets |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for (model, precision, world, ours, theirs, ratio, low, high, buckets,
         phases) in rows:
        lines.append(
            f"| {model} | {precision} | {world} | {ours:.0f} | {theirs:.0f} | "
            f"{ratio:.2f}x | {low:.2f}-{high:.2f} | "
            f"{phases['forward_ms']:.1f} / {phases['backward_ms']:.1f} / "
            f"{phases['optimizer_ms']:.1f} / {phases['comm_wait_ms']:.1f} | "
            f"{buckets} |")
    lines += [
        "",
        f"{args.rounds} alternating rounds per row; batch {BATCH} per rank; one "
        "intra-op thread per rank; ours built with --config=bench "
        f"({facts['build']}), LibTorch {facts['libtorch']}; PyTorch "
        f"{facts['torch']} (python3-torch, AdamW foreach="
        f"{facts['foreach']}, i.e. single-tensor). BLAS ours: "
        f"{facts['blas_ours']}; PyTorch's process mapped: "
        f"{facts['blas_theirs']}."]
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
