#!/usr/bin/env python3
"""Memory per rank at the peak, per strategy and world size (not a test).

Builds //trainer with --config=bench and runs ddp, zero1, zero2 (and, asked
for, fsdp) at each
world size of --worlds on one model (default: the memory test's, 9.6M
parameters, --bucket_cap_mb=1 where it applies, batch 1 per rank, one step), then prints a
Markdown table of what the largest rank held at its peak
(TrainResult.memory[r].at_peak: parameters, gradients, AdamW state,
collective temporaries walked at the peak, the unattributed rest) next to
the closed forms (ddp 16P, zero1 8P + 8P/N, zero2 4P + 12P/N, fsdp 16P/N
+ the root and the gathered blocks in flight), and each
process's VmHWM. The figures are allocator counts: they do not depend on the
machine's load.

Usage (from the checkout):
  /usr/bin/python3 trainer/bench/memory_breakdown.py [--worlds=2,4]
      [--strategies=ddp,zero1,zero2,fsdp] [--model_flags="--d_model=256 ..."]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ddp_bench  # noqa: E402  (build_ours, CHECKOUT)

MODEL_FLAGS = ("--data=synthetic --vocab_size=512 --d_model=256 --n_layers=12 "
               "--n_heads=4 --seq_len=32 --batch_size=1 --steps=1 "
               "--lr_warmup_steps=0 --timing_warmup_steps=0")
# --bucket_cap_mb where the strategy buckets its gradients (the trainer
# refuses it under fsdp, whose unit is the block).
BUCKET_FLAGS = {"ddp": ["--bucket_cap_mb=1"], "zero1": ["--bucket_cap_mb=1"],
                "zero2": ["--bucket_cap_mb=1"]}
# (replicated, sharded) multiples of P; fsdp's root unit and in-flight
# blocks come on top (trainer/memory/memory_check.h).
CLOSED_FORMS = {"ddp": (16, 0), "zero1": (8, 8), "zero2": (4, 12),
                "fsdp": (0, 16)}


def mb(value):
    return f"{int(value) / 1e6:.3f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--strategies", default="ddp,zero1,zero2")
    parser.add_argument("--model_flags", default=MODEL_FLAGS)
    args = parser.parse_args()
    binary = ddp_bench.build_ours()
    lines = [
        "| strategy | ranks | peak MB | at | parameters | gradients | AdamW | "
        "collective | unattributed | closed form MB | VmHWM MB |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | "
        "---: |"]
    with tempfile.TemporaryDirectory() as workdir:
        for strategy in args.strategies.split(","):
            for world in [int(w) for w in args.worlds.split(",")]:
                out = os.path.join(workdir, f"{strategy}_{world}.json")
                command = [binary] + args.model_flags.split() + BUCKET_FLAGS.get(
                    strategy, []) + [f"--strategy={strategy}", f"--nproc={world}",
                    "--intra_op_threads=1", "--peak_flops=1e11",
                    "--nomarkdown", f"--out={out}"]
                done = subprocess.run(command, cwd=ddp_bench.CHECKOUT,
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{' '.join(command)} failed:\n"
                             f"{done.stderr[-3000:]}")
                with open(out) as f:
                    result = json.load(f)
                memory = max(result["memory"],
                             key=lambda m: int(m["peak_bytes"]))
                at = memory["at_peak"]
                p = int(result["model"]["parameter_count"])
                replicated, sharded = CLOSED_FORMS[strategy]
                closed = replicated * p + sharded * p / world
                form = (f"{replicated}P" if not sharded else
                        f"{sharded}P/{world}" if not replicated else
                        f"{replicated}P + {sharded}P/{world}")
                lines.append(
                    f"| {strategy} | {world} | {mb(at['peak_bytes'])} | "
                    f"{at['where']} | {mb(at['parameter_bytes'])} | "
                    f"{mb(at['gradient_bytes'])} | "
                    f"{mb(at['optimizer_state_bytes'])} | "
                    f"{mb(at['collective_bytes'])} | "
                    f"{mb(at['unattributed_bytes'])} | {form} = "
                    f"{closed / 1e6:.3f} | "
                    f"{mb(max(int(m['vm_hwm_bytes']) for m in result['memory']))}"
                    " |")
                print(lines[-1], flush=True)
    lines.append("")
    lines.append(f"P = {p} parameters; model flags: {args.model_flags}; the "
                 "largest rank's figures (every rank's are in the result).")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
