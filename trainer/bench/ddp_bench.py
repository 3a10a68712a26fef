#!/usr/bin/env python3
"""DDP and ZeRO-1 throughput and memory: our trainer against PyTorch's own,
same everything.

Builds //trainer with --config=bench (-c opt), then for each model (tiny:
vocab 512, d_model 128, 2 layers, 4 heads, seq 64; small: vocab 4096, d_model
256, 4 layers, 4 heads, seq 128; batch 8 per rank), precision (fp32, bf16)
and world size (1, 2) runs ours and ddp_peer.py (torch DDP over gloo) in
alternation, --rounds times (>= 3), one intra-op thread per rank, synthetic
data, dropout 0, AdamW with the same weight-decay groups, clipping at 1.0.
Both sides load the same LibTorch, oneDNN and BLAS (printed). Tokens/s is the
timed steps' global tokens / the slowest rank's step time on both sides.

--gemms=onednn,blas runs ours once per GEMM backend (--gemm, docs/gemm.md) in
each round, next to the same PyTorch run: one row per backend.

--strategies=zero1 compares our --strategy=zero1 with DDP plus PyTorch 1.13's
ZeroRedundancyOptimizer (ddp_peer.py --strategy=zero1) the same way.

Prints two Markdown tables: (1) median tokens/s of each side and the median
of the per-round ratios ours / PyTorch; rank 0's process CPU time per step on
each side (all threads; hardly moved by other processes on a shared machine,
unlike wall time) and the median ratio PyTorch / ours (tokens per
CPU-second); our per-phase times (forward, backward, optimizer incl. the wait
for bucket all-reduces, comm wait) so that a missed goal can be explained; (2) memory per rank, read the same way on
both sides from /proc/self/status: VmHWM at the end (medians over rounds of
the largest rank's) and its growth over VmRSS before the model was built,
with our counting allocator's tensor peak beside it. The host's load average
(1 min) before each round is printed as a range: the machine is shared.
Goals: >= 1.2x on tiny, >= 1.0x on small; with the flat parameter store, >= 1.2x on tiny
fp32 at 2 ranks; with oneDNN GEMMs at 2 ranks: tiny fp32 >= 1.6x, small fp32
>= 1.5x, bf16 >= 1.3x.

Usage (from the checkout):
  /usr/bin/python3 trainer/bench/ddp_bench.py [--rounds=3] [--models=tiny,small]
      [--precisions=fp32,bf16] [--worlds=1,2] [--strategies=ddp,zero1]
      [--gemms=onednn,blas] [--out=results/ddp_bench.md]
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


def run_ours(binary, model, precision, world, strategy, workdir, gemm):
    shape = MODELS[model]
    out = os.path.join(
        workdir, f"ours_{model}_{precision}_{world}_{strategy}_{gemm}.json")
    flags = [f"--{k}={v}" for k, v in shape.items()] + [
        "--data=synthetic", f"--batch_size={BATCH}", f"--precision={precision}",
        f"--nproc={world}", "--intra_op_threads=1", f"--strategy={strategy}",
        f"--gemm={gemm}",
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
                        "comm_wait_ms", "step_ms", "cpu_ms")}
    memory = result["memory"]
    return {"tokens_per_second": result["summary"]["tokens_per_second"]["mean"],
            "cpu_ms": phases["cpu_ms"],
            "phases": phases,
            "vm_hwm": max(int(m.get("vm_hwm_bytes", 0)) for m in memory),
            "vm_growth": max(int(m.get("vm_hwm_bytes", 0)) -
                             int(m.get("vm_rss_at_start_bytes", 0))
                             for m in memory),
            "tensor_peak": max(int(m.get("peak_bytes", 0)) for m in memory),
            "blas": result["run_context"]["blas_library"],
            "libtorch": result["run_context"]["libtorch_version"],
            "buckets": len(result["strategy"]["buckets"]),
            "build": result["run_context"]["build_mode"]}


def run_theirs(model, precision, world, strategy):
    shape = MODELS[model]
    flags = [f"--{k}={v}" for k, v in shape.items()] + [
        f"--batch_size={BATCH}", f"--precision={precision}",
        f"--world_size={world}", f"--strategy={strategy}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([PYTHON, os.path.join(HERE, "ddp_peer.py")] + flags,
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"ddp_peer.py failed ({done.returncode}):\n"
                 f"{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["cpu_ms"] = result["cpu_ms_per_step"]
    result["vm_hwm"] = max(m["vm_hwm_bytes"] for m in result["memory"])
    result["vm_growth"] = max(m["vm_hwm_bytes"] - m["vm_rss_at_start_bytes"]
                              for m in result["memory"])
    return result


def mb(value):
    return f"{value / 1e6:.1f}"


def summarise(ours, theirs, facts, **key):
    """One row: medians over the alternating rounds of one backend."""
    facts.update(blas_ours=ours[0]["blas"], blas_theirs=theirs[0]["blas"],
                 libtorch=ours[0]["libtorch"], torch=theirs[0]["torch"],
                 build=ours[0]["build"], foreach=theirs[0]["adamw_foreach"])
    ratios = [o["tokens_per_second"] / t["tokens_per_second"]
              for o, t in zip(ours, theirs)]
    # PyTorch's CPU time / ours: tokens per CPU-second.
    cpu_ratios = [t["cpu_ms"] / o["cpu_ms"] for o, t in zip(ours, theirs)]

    def median(runs, name):
        return statistics.median(r[name] for r in runs)

    phases = {k: statistics.median(o["phases"][k] for o in ours)
              for k in ours[0]["phases"]}
    return dict(key,
                ours=median(ours, "tokens_per_second"),
                theirs=median(theirs, "tokens_per_second"),
                ratio=statistics.median(ratios),
                low=min(ratios), high=max(ratios),
                cpu_ours=median(ours, "cpu_ms"),
                cpu_theirs=median(theirs, "cpu_ms"),
                cpu_ratio=statistics.median(cpu_ratios),
                cpu_low=min(cpu_ratios), cpu_high=max(cpu_ratios),
                buckets=ours[0]["buckets"], phases=phases,
                hwm_ours=median(ours, "vm_hwm"),
                hwm_theirs=median(theirs, "vm_hwm"),
                growth_ours=median(ours, "vm_growth"),
                growth_theirs=median(theirs, "vm_growth"),
                tensor_peak=median(ours, "tensor_peak"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="tiny,small")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--worlds", default="1,2")
    parser.add_argument("--strategies", default="ddp")
    parser.add_argument("--gemms", default="onednn,blas")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.rounds < 1:
        sys.exit("--rounds must be >= 1 (the benchmark asks for >= 3)")
    binary = build_ours()
    rows = []
    facts = {}
    loads = []
    with tempfile.TemporaryDirectory() as workdir:
        for strategy in args.strategies.split(","):
            for model in args.models.split(","):
                for precision in args.precisions.split(","):
                    for world in [int(w) for w in args.worlds.split(",")]:
                        if strategy != "ddp" and world == 1:
                            continue  # nothing to shard
                        gemms = args.gemms.split(",")
                        ours = {gemm: [] for gemm in gemms}
                        theirs = []
                        for round_ in range(args.rounds):
                            loads.append(os.getloadavg()[0])
                            for gemm in gemms:
                                ours[gemm].append(run_ours(
                                    binary, model, precision, world, strategy,
                                    workdir, gemm))
                            theirs.append(run_theirs(model, precision, world,
                                                     strategy))
                            ours_text = ", ".join(
                                f"{gemm} {ours[gemm][-1]['tokens_per_second']:.0f}"
                                for gemm in gemms)
                            print(f"{strategy} {model} {precision} world "
                                  f"{world} round {round_ + 1} (load "
                                  f"{loads[-1]:.1f}): ours ({ours_text}) "
                                  f"tok/s, PyTorch "
                                  f"{theirs[-1]['tokens_per_second']:.0f}",
                                  flush=True)
                        for gemm in gemms:
                            rows.append(summarise(ours[gemm], theirs, facts,
                                                  strategy=strategy,
                                                  model=model,
                                                  precision=precision,
                                                  world=world, gemm=gemm))
    lines = [
        "| strategy | model | precision | ranks | gemm | ours tok/s | "
        "PyTorch tok/s | "
        "ratio (median) | ratio range | CPU ms/step ours / PyTorch | "
        "CPU ratio (range) | our fwd / bwd / opt / comm-wait ms | buckets |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | "
        "---: | --- | ---: |"]
    for r in rows:
        phases = r["phases"]
        lines.append(
            f"| {r['strategy']} | {r['model']} | {r['precision']} | "
            f"{r['world']} | {r['gemm']} | {r['ours']:.0f} | "
            f"{r['theirs']:.0f} | "
            f"{r['ratio']:.2f}x | {r['low']:.2f}-{r['high']:.2f} | "
            f"{r['cpu_ours']:.1f} / {r['cpu_theirs']:.1f} | "
            f"{r['cpu_ratio']:.2f}x ({r['cpu_low']:.2f}-{r['cpu_high']:.2f}) | "
            f"{phases['forward_ms']:.1f} / {phases['backward_ms']:.1f} / "
            f"{phases['optimizer_ms']:.1f} / {phases['comm_wait_ms']:.1f} | "
            f"{r['buckets']} |")
    lines += [
        "",
        "| strategy | model | precision | ranks | gemm | ours VmHWM MB | "
        "PyTorch VmHWM MB | ours growth MB | PyTorch growth MB | "
        "our tensor peak MB |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['strategy']} | {r['model']} | {r['precision']} | "
            f"{r['world']} | {r['gemm']} | {mb(r['hwm_ours'])} | "
            f"{mb(r['hwm_theirs'])} | "
            f"{mb(r['growth_ours'])} | {mb(r['growth_theirs'])} | "
            f"{mb(r['tensor_peak'])} |")
    lines += [
        "",
        f"{args.rounds} alternating rounds per row; batch {BATCH} per rank; one "
        "intra-op thread per rank; ours built with --config=bench "
        f"({facts['build']}), LibTorch {facts['libtorch']}; PyTorch "
        f"{facts['torch']} (python3-torch, AdamW foreach="
        f"{facts['foreach']}, i.e. single-tensor). BLAS ours: "
        f"{facts['blas_ours']}; PyTorch's process mapped: "
        f"{facts['blas_theirs']}. Memory: the largest rank's VmHWM (median "
        "over rounds) and its growth over VmRSS before the model; the tensor "
        "peak is our counting allocator's. Load average (1 min) before the "
        f"rounds: {min(loads):.1f}-{max(loads):.1f} (median "
        f"{statistics.median(loads):.1f})."]
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
