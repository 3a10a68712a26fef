#!/usr/bin/python3
"""The PyTorch side of comm_bench's comparison benchmark (docs/benchmarks.md).

Runs torch.distributed collectives on Gloo with 2 processes on this host and
times them exactly as comm_bench's per-iteration loop does: for each size,
warm-up calls, then `iters` iterations of (barrier; start clock; one blocking
collective; stop clock). An iteration's time is the slowest rank's; the result
per size is the median over iterations. One intra-op thread per rank.

Sizes follow comm_bench's (nccl-tests') convention, so the same S means the
same buffers: all_reduce and broadcast move an S-byte tensor; all_gather's S is
the gathered output, reduce_scatter's, all_to_all's and all_to_allv's the whole
input, per-rank counts rounded down to 16 bytes as nccl-tests does.

PyTorch 1.13's Gloo backend has no reduce_scatter: it is what a PyTorch user
writes instead, all_to_all_single then a sum of the n received blocks
(reported as "reduce_scatter" with "emulated": true). all_to_allv is
all_to_all_single with explicit, equal split sizes (comm_bench's uniform
imbalance).

Prints one JSON object per line: {"op", "bytes", "p50_us"}.
Run with Debian's /usr/bin/python3 (python3-torch), not a pyenv python.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def sharded_count(size, element_size, world_size):
    alignment = 16 // element_size
    return (size // element_size // world_size) // alignment * alignment


def make_call(op, size, world_size, rank):
    """Returns (bytes S, a function running one blocking collective)."""
    element_size = 4
    if op in ("all_reduce", "broadcast"):
        count = size // element_size
        tensor = torch.full((count,), float(rank))
        if op == "all_reduce":
            return count * element_size, lambda: dist.all_reduce(tensor)
        return count * element_size, lambda: dist.broadcast(tensor, 0)
    count = sharded_count(size, element_size, world_size)
    if count == 0:
        return 0, None
    if op == "all_gather":
        tensor = torch.full((count,), float(rank))
        outputs = [torch.empty(count) for _ in range(world_size)]
        return count * world_size * element_size, lambda: dist.all_gather(outputs, tensor)
    if op == "all_to_all":
        source = torch.full((count * world_size,), float(rank))
        target = torch.empty(count * world_size)
        return count * world_size * element_size, lambda: dist.all_to_all_single(target, source)
    if op == "all_to_allv":
        source = torch.full((count * world_size,), float(rank))
        target = torch.empty(count * world_size)
        splits = [count] * world_size
        return count * world_size * element_size, lambda: dist.all_to_all_single(
            target, source, output_split_sizes=splits, input_split_sizes=splits)
    if op == "reduce_scatter":
        source = torch.full((count * world_size,), float(rank))
        blocks = torch.empty(count * world_size)
        output = torch.empty(count)

        def emulated():
            dist.all_to_all_single(blocks, source)
            torch.sum(blocks.view(world_size, count), dim=0, out=output)
        return count * world_size * element_size, emulated
    raise ValueError(op)


def worker(rank, args, port, queue):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=args.world_size)
    results = []
    for op in args.ops.split(","):
        size = args.minbytes
        while size <= args.maxbytes:
            nbytes, call = make_call(op, size, args.world_size, rank)
            if call is not None:
                for _ in range(args.warmup_iters):
                    call()
                times = []
                for _ in range(args.iters):
                    dist.barrier()
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
                mine = torch.tensor(times, dtype=torch.float64)
                everyone = [torch.empty_like(mine) for _ in range(args.world_size)]
                dist.all_gather(everyone, mine)
                slowest = torch.stack(everyone).max(dim=0).values
                # Linear interpolation, as comm_bench's p50 (common/base/stats.h);
                # torch.median would take the lower middle value.
                results.append({"op": op, "bytes": nbytes,
                                "p50_us": float(torch.quantile(slowest, 0.5)) * 1e6,
                                "emulated": op == "reduce_scatter"})
            size *= args.stepfactor
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        queue.put(results)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ops", default="all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,all_to_allv")
    parser.add_argument("--minbytes", type=int, default=4096)
    parser.add_argument("--maxbytes", type=int, default=64 << 20)
    parser.add_argument("--stepfactor", type=int, default=2)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup_iters", type=int, default=5)
    parser.add_argument("--world_size", type=int, default=2)
    args = parser.parse_args()
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [context.Process(target=worker, args=(rank, args, port, queue))
                 for rank in range(args.world_size)]
    for process in processes:
        process.start()
    results = queue.get()
    for process in processes:
        process.join()
        if process.exitcode != 0:
            sys.exit(f"torch_peer: rank exited with {process.exitcode}")
    for result in results:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
