#!/usr/bin/python3
"""comm_bench (Gloo) vs PyTorch's torch.distributed on the same Gloo, and the ceiling.

For each world size (--world_sizes, default 2,3), --rounds alternating rounds
of comm_bench and torch_peer.py (PyTorch 1.13, the same Gloo); with
--transport=tcp each round first runs //comm_bench:loopback_ceiling (what this
host moves over loopback TCP in each shape a collective needs) and gives it to
comm_bench (--ceiling). Over shared memory (auto or shm on one host) comm_bench
measures each op's shared-memory ceiling inside its own sweep. Which of ours
and PyTorch's runs first alternates from round to round.

Every figure comes from the per-iteration timing both sides share (barrier,
one blocking call, the slowest rank's time; p50 over --iters iterations), so
ours and PyTorch's are timed alike: busbw = S x factor / p50 (nccl-tests'
factors, docs/comm_bench.md). Per op, size and world size the table shows the
median over rounds (and the range) of our busbw, PyTorch's, the median of the
per-round time ratios ours / PyTorch (< 1: ours is faster), the row's
ceiling as comm_bench matched it (median over rounds; shared memory: the
sweep's own ceiling for that op and size; tcp: 2 ranks tcp one way for
broadcast, both ways otherwise, 3 ranks tcp 2 peers at once) and comm_bench's
busbw / ceiling (median over rounds). That fraction uses comm_bench's loop
busbw (mean over ranks of the back-to-back loop), the timing the ceiling is
measured like, not the p50 column.

Like for like: all_reduce and broadcast in place (PyTorch's are), the others
out of place. PyTorch 1.13's Gloo has no reduce_scatter: its column is what a
PyTorch user writes instead (all_to_all_single + a sum), marked "emulated".

  bazel run --config=bench //comm_bench:compare_with_torch -- --rounds=3 \\
      --markdown=/tmp/compare.md
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
IN_PLACE = {"all_reduce", "broadcast"}
FACTOR = {  # busbw / algbw at n ranks (nccl-tests)
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def factor(op, n):
    return FACTOR.get(op, lambda n: (n - 1) / n)(n)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def format_bytes(n):
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}iB"
    return f"{n} B"


def run_ceiling(binary, n, out_dir, tag):
    out = os.path.join(out_dir, f"ceiling_{tag}.json")
    subprocess.run([binary, f"--peers_world_size={max(n, 3)}", "--rounds=3",
                    f"--out={out}"], check=True, stdout=subprocess.DEVNULL)
    return out


def run_ours(binary, args, n, ceiling, out_dir, tag):
    out = os.path.join(out_dir, f"comm_bench_{tag}.json")
    command = [binary, f"--nproc={n}", f"--ops={args.ops}", f"--minbytes={args.minbytes}",
               f"--maxbytes={args.maxbytes}", f"--stepfactor={args.stepfactor}",
               f"--iters={args.iters}", f"--warmup_iters={args.warmup_iters}",
               f"--transport={args.transport}", f"--out={out}"]
    if ceiling:
        command.append(f"--ceiling={ceiling}")
    # Exit 1 is a verdict (e.g. "ceiling invalid"), shown in the table; the
    # result file is still written.
    done = subprocess.run(command, stdout=subprocess.DEVNULL)
    if done.returncode not in (0, 1) or not os.path.exists(out):
        sys.exit(f"comm_bench exited {done.returncode}: {' '.join(command)}")
    with open(out) as f:
        result = json.load(f)
    rows = {}
    for row in result["rows"]:
        wanted = "in_place" if row["op"] in IN_PLACE else "out_of_place"
        if row["placement"] == wanted:
            rows[(row["op"], int(row["bytes"]))] = row
    return rows, result["context"]


def run_theirs(args, n, out_dir, tag):
    command = ["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"), f"--ops={args.ops}",
               f"--minbytes={parse_size(args.minbytes)}", f"--maxbytes={parse_size(args.maxbytes)}",
               f"--stepfactor={args.stepfactor}", f"--iters={args.iters}",
               f"--warmup_iters={args.warmup_iters}", f"--world_size={n}"]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in output.splitlines():
        record = json.loads(line)
        rows[(record["op"], int(record["bytes"]))] = record
    with open(os.path.join(out_dir, f"torch_{tag}.json"), "w") as f:
        json.dump(list(rows.values()), f, indent=1)
    return rows


def spread(values, digits=2):
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comm_bench", default=os.path.join(HERE, "..", "comm_bench"))
    parser.add_argument("--loopback_ceiling",
                        default=os.path.join(HERE, "..", "loopback_ceiling"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--world_sizes", default="2,3")
    parser.add_argument(
        "--ops", default="all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,all_to_allv")
    parser.add_argument("--minbytes", default="1M")
    parser.add_argument("--maxbytes", default="64M")
    parser.add_argument("--stepfactor", type=int, default=4)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup_iters", type=int, default=3)
    parser.add_argument("--transport", default="auto",
                        help="comm_bench --transport: auto (shared memory on one host), shm, tcp")
    parser.add_argument("--markdown", default="", help="also write the table here")
    parser.add_argument("--raw_dir", default="",
                        help="keep every round's comm_bench, ceiling and torch files here")
    args = parser.parse_args()
    if args.rounds < 1:
        sys.exit("--rounds must be >= 1")

    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    lines = ["| op | ranks | S | ours busbw GB/s (median, range) | PyTorch busbw GB/s "
             "(median, range) | ours / PyTorch time (median, range) | ceiling GB/s (shape) | "
             "ours / ceiling | ours ran |",
             "|" + " --- |" * 9]
    context = None
    with tempfile.TemporaryDirectory() as temporary:
        out_dir = args.raw_dir or temporary
        os.makedirs(out_dir, exist_ok=True)
        for n in [int(w) for w in args.world_sizes.split(",")]:
            ours, theirs = [], []
            for round_index in range(1, args.rounds + 1):
                tag = f"n{n}_round{round_index}"
                ceiling = (run_ceiling(args.loopback_ceiling, n, out_dir, tag)
                           if args.transport == "tcp" else "")
                if round_index % 2 == 1:
                    rows, context = run_ours(args.comm_bench, args, n, ceiling, out_dir, tag)
                    ours.append(rows)
                    theirs.append(run_theirs(args, n, out_dir, tag))
                else:
                    theirs.append(run_theirs(args, n, out_dir, tag))
                    rows, context = run_ours(args.comm_bench, args, n, ceiling, out_dir, tag)
                    ours.append(rows)
                print(f"{n} ranks, round {round_index}/{args.rounds} done", file=sys.stderr,
                      flush=True)
            for op in args.ops.split(","):
                for key in sorted(k for k in ours[0] if k[0] == op):
                    if not all(key in r for r in ours + theirs):
                        continue
                    size = key[1]
                    f = factor(op, n)
                    our_bw = [size * f / (r[key]["iteration_p50_us"] * 1e3) for r in ours]
                    their_bw = [size * f / (t[key]["p50_us"] * 1e3) for t in theirs]
                    ratios = [r[key]["iteration_p50_us"] / t[key]["p50_us"]
                              for r, t in zip(ours, theirs)]
                    ceilings = [r[key].get("ceiling_gbps", 0) for r in ours]
                    ceiling = statistics.median(ceilings)
                    shape = ours[0][key].get("ceiling_shape", "")
                    emulated = " (emulated)" if theirs[0][key].get("emulated") else ""
                    fractions = [r[key].get("busbw_fraction_of_ceiling", 0) for r in ours]
                    invalid = any(r[key].get("ceiling_invalid") for r in ours)
                    fraction = (f"{statistics.median(fractions):.0%}"
                                + (" CEILING INVALID" if invalid else "")
                                if ceiling > 0 else "–")
                    lines.append(
                        f"| {op} | {n} | {format_bytes(size)} | "
                        f"{statistics.median(our_bw):.2f} ({spread(our_bw)}) | "
                        f"{statistics.median(their_bw):.2f} ({spread(their_bw)}){emulated} | "
                        f"{statistics.median(ratios):.2f} ({spread(ratios)}) | "
                        f"{ceiling:.2f} ({shape}) | {fraction} | "
                        f"{ours[-1][key].get('algorithm', '')} |")
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    summary = (f"comm_bench {context['git_commit'][:12]} ({context['build_mode']}) against "
               f"PyTorch 1.13 (/usr/bin/python3) on the same Gloo, {context['cpu_model']} "
               f"({context['cpu_cores']} cores); {args.rounds} alternating rounds per world "
               f"size, {args.iters} timed iterations per point (p50 of the slowest rank), "
               f"float32, sum; load average {load_before} before, {load_after} after.")
    text = summary + "\n\n" + "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
