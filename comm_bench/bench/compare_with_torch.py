#!/usr/bin/python3
"""comm_bench (Gloo) vs PyTorch's torch.distributed on the same Gloo.

One run, alternating --rounds times: comm_bench --nproc=2, then torch_peer.py
(2 processes), and the loopback TCP ceiling, each round. For each op and size
it prints the per-iteration median of comm_bench divided by PyTorch's (median
over rounds of each side's per-iteration p50), and comm_bench's busbw (nccl-
tests' definition, from its back-to-back loop) as a fraction of the loopback
TCP ceiling (one stream, one direction, median over rounds).

Like for like: PyTorch's all_reduce and broadcast are in place, so they are
compared with comm_bench's in-place rows; all_gather (PyTorch's list form) and
all_to_all (all_to_all_single) with the out-of-place rows.

  bazel run --config=bench //comm_bench:compare_with_torch -- --rounds=3
"""
import argparse
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PLACEMENT = {"all_reduce": "in_place", "broadcast": "in_place",
             "all_gather": "out_of_place", "all_to_all": "out_of_place"}


def _sink(port_queue, total):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port_queue.put(server.getsockname()[1])
        connection, _ = server.accept()
        with connection:
            buffer = bytearray(4 << 20)
            view = memoryview(buffer)
            received = 0
            while received < total:
                n = connection.recv_into(view)
                if n == 0:
                    break
                received += n
            connection.sendall(b"x")


def loopback_tcp_gbps(total=1 << 30, chunk=4 << 20):
    """One TCP stream over 127.0.0.1 between two processes, GB/s (1e9 B/s)."""
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    sink = context.Process(target=_sink, args=(ports, total))
    sink.start()
    port = ports.get()
    payload = memoryview(bytearray(chunk))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        start = time.perf_counter()
        sent = 0
        while sent < total:
            sock.sendall(payload)
            sent += chunk
        sock.recv(1)  # the sink has everything
        seconds = time.perf_counter() - start
    sink.join()
    return total / 1e9 / seconds


def run_ours(binary, args, out_dir, round_index):
    out = os.path.join(out_dir, f"comm_bench_round{round_index}.json")
    command = [binary, "--nproc=2", f"--ops={args.ops}", f"--minbytes={args.minbytes}",
               f"--maxbytes={args.maxbytes}", f"--iters={args.iters}",
               f"--warmup_iters={args.warmup_iters}", f"--out={out}"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        result = json.load(f)
    rows = {}
    for row in result["rows"]:
        if row["placement"] == PLACEMENT[row["op"]]:
            rows[(row["op"], int(row["bytes"]))] = row
    return rows, result["context"]


def run_theirs(args):
    command = ["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"), f"--ops={args.ops}",
               f"--minbytes={parse_size(args.minbytes)}", f"--maxbytes={parse_size(args.maxbytes)}",
               f"--iters={args.iters}", f"--warmup_iters={args.warmup_iters}"]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in output.splitlines():
        record = json.loads(line)
        rows[(record["op"], int(record["bytes"]))] = record
    return rows


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def format_bytes(n):
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comm_bench", default=os.path.join(HERE, "..", "comm_bench"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ops", default="all_reduce,all_gather,broadcast,all_to_all")
    parser.add_argument("--minbytes", default="4K")
    parser.add_argument("--maxbytes", default="64M")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup_iters", type=int, default=5)
    parser.add_argument("--markdown", default="", help="also write the table here")
    parser.add_argument("--raw_dir", default="",
                        help="keep every round's comm_bench JSON and torch rows here")
    args = parser.parse_args()

    ours, theirs, ceilings = [], [], []
    with tempfile.TemporaryDirectory() as temporary:
        out_dir = args.raw_dir or temporary
        os.makedirs(out_dir, exist_ok=True)
        for round_index in range(1, args.rounds + 1):
            ceilings.append(loopback_tcp_gbps())
            print(f"round {round_index}: loopback TCP {ceilings[-1]:.2f} GB/s", file=sys.stderr)
            rows, context = run_ours(args.comm_bench, args, out_dir, round_index)
            ours.append(rows)
            print(f"round {round_index}: comm_bench done", file=sys.stderr)
            theirs.append(run_theirs(args))
            with open(os.path.join(out_dir, f"torch_round{round_index}.json"), "w") as f:
                json.dump([dict(v) for v in theirs[-1].values()], f, indent=1)
            print(f"round {round_index}: torch.distributed done", file=sys.stderr)

    ceiling = statistics.median(ceilings)
    header = ("| op | size | ours p50 (us) | torch p50 (us) | ours / torch | "
              "per-round ratios | ours busbw (GB/s) | busbw / TCP |")
    lines = [header, "|" + " --- |" * 8]
    for op in args.ops.split(","):
        for key in sorted(k for k in ours[0] if k[0] == op):
            if not all(key in r for r in ours + theirs):
                continue
            our_p50 = statistics.median(r[key]["iteration_p50_us"] for r in ours)
            their_p50 = statistics.median(r[key]["p50_us"] for r in theirs)
            busbw = statistics.median(r[key]["busbw_gbps"] for r in ours)
            per_round = sorted(o[key]["iteration_p50_us"] / t[key]["p50_us"]
                               for o, t in zip(ours, theirs))
            spread = f"{per_round[0]:.2f}–{per_round[-1]:.2f}"
            lines.append(f"| {op} | {format_bytes(key[1])} | {our_p50:.1f} | {their_p50:.1f} | "
                         f"{our_p50 / their_p50:.3f} | {spread} | {busbw:.3f} | "
                         f"{busbw / ceiling:.2f} |")
    summary = (f"comm_bench {context['git_commit'][:12]} ({context['build_mode']}), "
               f"PyTorch 1.13 Gloo, 2 ranks on {context['cpu_model']} "
               f"({context['cpu_cores']} cores), {args.rounds} alternating rounds, "
               f"iters {args.iters}; loopback TCP ceiling {ceiling:.2f} GB/s "
               f"(rounds: {', '.join(f'{c:.2f}' for c in ceilings)})")
    text = summary + "\n\n" + "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
