#!/usr/bin/env python3
"""PyTorch's own DDP (and ZeRO-1) on the trainer's model: the peer of //trainer
in the DDP benchmark (trainer/bench/ddp_bench.py).

The same GPT as trainer/model/model.h (docs/trainer.md), written in plain torch ops
with the parameters registered in the trainer's order (so DDP's buckets, built
in reverse registration order, are the trainer's); GPT-2 initialisation; AdamW
(torch.optim.AdamW, single-tensor, PyTorch's defaults) with the trainer's
weight-decay groups (linear weights only); cosine schedule with warm-up;
clip_grad_norm_(1.0); bf16 as the trainer runs it (CPU autocast, LayerNorm and
the loss in fp32). torch.nn.parallel.DistributedDataParallel over gloo,
bucket_cap_mb=25, one intra-op thread per rank; ranks are processes started by
torch.multiprocessing on 127.0.0.1. Dropout is 0 (the benchmark's setting).
--strategy=zero1: the same DDP, with AdamW wrapped in PyTorch 1.13's
torch.distributed.optim.ZeroRedundancyOptimizer (each rank keeps the AdamW
state of its share of the parameters, whole parameters assigned greedily by
size, and broadcasts them after its step; DDP still all-reduces the full
gradients).

Memory is read as the trainer reads it (trainer/train_result.proto
RankMemory): every rank's VmRSS from /proc/self/status once the group is up,
before the model is built, and its VmHWM at the end.

Per step, as the trainer: zero_grad(set_to_none) -> forward -> backward (DDP's
bucketed all-reduce overlaps it) -> clip -> AdamW -> the mean loss over ranks;
the step time is then max-reduced over ranks, and tokens/s over the timed
steps is global tokens x steps / the sum of the slowest rank's step times.
Rank 0's process CPU time per step (all threads, time.process_time) is
reported beside it, as the trainer's StepRecord.cpu_ms.

Usage: /usr/bin/python3 ddp_peer.py --world_size=2 --vocab_size=512 ...
Prints one JSON line: {"tokens_per_second": ..., ...}.
"""

import argparse
import json
import math
import os
import re
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F


class Gpt(torch.nn.Module):
    """trainer/model/model.h's GPT; parameters registered in its order."""

    def __init__(self, vocab, d, layers, heads, seq, seed):
        super().__init__()
        self.vocab, self.d, self.layers, self.heads = vocab, d, layers, heads
        generator = torch.Generator().manual_seed(seed)
        residual_std = 0.02 / math.sqrt(2.0 * layers)
        self.names = []
        self.decay = []

        def add(name, tensor, decay=False):
            parameter = torch.nn.Parameter(tensor)
            self.register_parameter(name.replace(".", "_"), parameter)
            self.names.append(name)
            if decay:
                self.decay.append(parameter)
            return parameter

        def normal(name, shape, std, decay=False):
            return add(name, torch.randn(*shape, generator=generator) * std,
                       decay)

        normal("wte", (vocab, d), 0.02)
        normal("wpe", (seq, d), 0.02)
        for layer in range(layers):
            p = f"h.{layer}."
            add(p + "ln_1.weight", torch.ones(d))
            add(p + "ln_1.bias", torch.zeros(d))
            normal(p + "attn.c_attn.weight", (3 * d, d), 0.02, True)
            add(p + "attn.c_attn.bias", torch.zeros(3 * d))
            normal(p + "attn.c_proj.weight", (d, d), residual_std, True)
            add(p + "attn.c_proj.bias", torch.zeros(d))
            add(p + "ln_2.weight", torch.ones(d))
            add(p + "ln_2.bias", torch.zeros(d))
            normal(p + "mlp.c_fc.weight", (4 * d, d), 0.02, True)
            add(p + "mlp.c_fc.bias", torch.zeros(4 * d))
            normal(p + "mlp.c_proj.weight", (d, 4 * d), residual_std, True)
            add(p + "mlp.c_proj.bias", torch.zeros(d))
        add("ln_f.weight", torch.ones(d))
        add("ln_f.bias", torch.zeros(d))

    def param(self, name):
        return getattr(self, name.replace(".", "_"))

    @staticmethod
    def layer_norm(x, weight, bias):
        # As common/nn/layers.cc: in fp32, back to the input's dtype.
        return F.layer_norm(x.float(), (x.shape[-1],), weight.float(),
                            bias.float(), 1e-5).to(x.dtype)

    def forward(self, tokens):  # (B, T) -> logits (B, T, V)
        batch, seq = tokens.shape
        d, heads = self.d, self.heads
        head_dim = d // heads
        x = F.embedding(tokens, self.param("wte")) + self.param("wpe")[:seq]
        future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
        for layer in range(self.layers):
            p = lambda name: self.param(f"h.{layer}.{name}")
            h = self.layer_norm(x, p("ln_1.weight"), p("ln_1.bias"))
            qkv = F.linear(h, p("attn.c_attn.weight"), p("attn.c_attn.bias"))
            q, k, v = (t.view(batch, seq, heads, head_dim).transpose(1, 2)
                       for t in qkv.split(d, dim=2))
            scores = torch.matmul(q, k.transpose(-2, -1)) * (
                1.0 / math.sqrt(head_dim))
            scores = scores.masked_fill(future, float("-inf"))
            attention = torch.softmax(scores, -1)
            context = torch.matmul(attention, v).transpose(1, 2).reshape(
                batch, seq, d)
            x = x + F.linear(context, p("attn.c_proj.weight"),
                             p("attn.c_proj.bias"))
            h = self.layer_norm(x, p("ln_2.weight"), p("ln_2.bias"))
            m = F.gelu(F.linear(h, p("mlp.c_fc.weight"), p("mlp.c_fc.bias")))
            x = x + F.linear(m, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
        x = self.layer_norm(x, self.param("ln_f.weight"),
                            self.param("ln_f.bias"))
        return F.linear(x, self.param("wte"))


def lr_at(step, args):
    if step <= args.lr_warmup_steps:
        return args.lr * step / args.lr_warmup_steps
    if step >= args.steps:
        return args.min_lr
    ratio = (step - args.lr_warmup_steps) / (args.steps - args.lr_warmup_steps)
    return args.min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (
        args.lr - args.min_lr)


def blas_library():
    maps = open("/proc/self/maps").read()
    found = sorted(set(re.findall(r"(/\S*libblas\S*|/\S*openblas\S*\.so\S*)",
                                  maps)))
    return ", ".join(found) or "none mapped"


def process_memory():
    """{"VmRSS": bytes, "VmHWM": bytes} of this process."""
    memory = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                number, unit = value.split()
                memory[key] = int(number) * (1024 if unit == "kB" else 1)
    return memory


def rank_main(rank, args, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    rss_at_start = process_memory()["VmRSS"]
    model = Gpt(args.vocab_size, args.d_model, args.n_layers, args.n_heads,
                args.seq_len, args.seed)
    decay_ids = {id(p) for p in model.decay}
    no_decay = [p for p in model.parameters() if id(p) not in decay_ids]
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    groups = [{"params": model.decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    if args.strategy == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        optimizer = ZeroRedundancyOptimizer(
            groups, optimizer_class=torch.optim.AdamW, lr=args.lr)
    else:
        optimizer = torch.optim.AdamW(groups, lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)
    bf16 = args.precision == "bf16"
    tokens_per_step = args.world_size * args.batch_size * args.seq_len
    timed_seconds, timed_steps, timed_cpu, losses = 0.0, 0, 0.0, []
    for step in range(1, args.steps + 1):
        batch = torch.randint(args.vocab_size,
                              (args.batch_size, args.seq_len + 1),
                              generator=generator)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        start = time.perf_counter()
        cpu_start = time.process_time()  # this process, all threads
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16,
                            cache_enabled=False):
            logits = ddp(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, args.vocab_size),
                               targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        cpu = time.process_time() - cpu_start
        elapsed = torch.tensor([time.perf_counter() - start],
                               dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        losses.append(mean_loss.item() / args.world_size)
        if step > args.timing_warmup_steps:
            timed_seconds += elapsed.item()
            timed_cpu += cpu
            timed_steps += 1
    memory = {"rank": rank, "vm_hwm_bytes": process_memory()["VmHWM"],
              "vm_rss_at_start_bytes": rss_at_start}
    if rank != 0:
        results.put(memory)
    else:
        results.put(dict(memory, **{
            "strategy": args.strategy,
            "tokens_per_second": tokens_per_step * timed_steps / timed_seconds,
            "mean_step_ms": 1000 * timed_seconds / timed_steps,
            "cpu_ms_per_step": 1000 * timed_cpu / timed_steps,
            "first_loss": losses[0], "final_loss": losses[-1],
            "parameters": sum(p.numel() for p in model.parameters()),
            "torch": torch.__version__, "blas": blas_library(),
            "intra_op_threads": torch.get_num_threads(),
            "adamw_foreach": optimizer.defaults.get("foreach"),
        }))
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in [("world_size", 2), ("vocab_size", 512),
                          ("d_model", 128), ("n_layers", 2), ("n_heads", 4),
                          ("seq_len", 64), ("batch_size", 8), ("steps", 30),
                          ("timing_warmup_steps", 5), ("lr_warmup_steps", 10),
                          ("seed", 1234)]:
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--precision", choices=["fp32", "bf16"],
                        default="fp32")
    parser.add_argument("--strategy", choices=["ddp", "zero1"], default="ddp")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--min_lr", type=float, default=1e-4)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    port = free_port()
    processes = [context.Process(target=rank_main,
                                 args=(rank, args, port, results))
                 for rank in range(args.world_size)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    if any(process.exitcode != 0 for process in processes):
        sys.exit("ddp_peer.py: a rank failed: exit codes "
                 f"{[p.exitcode for p in processes]}")
    ranks = sorted((results.get() for _ in processes),
                   key=lambda entry: entry["rank"])
    summary = dict(ranks[0])
    summary["memory"] = [{k: entry[k] for k in ("rank", "vm_hwm_bytes",
                                                "vm_rss_at_start_bytes")}
                         for entry in ranks]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
