#!/usr/bin/env python3
"""PyTorch's GPT-2 on a GPU, nanoGPT-style: the peer of trainer_cuda in
tools/gpu/check.sh's performance check (docs/gpu.md).

The same model as the trainer's (trainer/model/model.h): GPT-2 124M shapes by
default (d=768, 12 layers, 12 heads, T=1024, vocabulary 50304: 50257 padded to
a multiple of 128), learned positions, pre-LayerNorm blocks (eps 1e-5, with
bias), exact (erf) GELU, the head tied to the token embedding; GPT-2
initialisation (normal 0.02, zero biases; the init does not change the
throughput). Causal attention through F.scaled_dot_product_attention when the
installed PyTorch has it (flash attention on a GPU), else the explicit
masked softmax. bf16 autocast (--precision=bf16, the default) with fp32 master
weights, AdamW (fused=True where the installed PyTorch offers it, else
foreach) with weight decay on the linear weights, clip_grad_norm_(1.0).
Synthetic tokens, a fresh random batch per step drawn on the device.

--mode=eager runs the module as it is; --mode=compile wraps it in
torch.compile (PyTorch 2.x; refused with exit 2 where it is missing). The
first --warmup steps (compilation included) are not timed; each step is
timed between two device synchronisations.

Prints one line per step ("step N loss L ms M tokens/s R") and writes --out
(JSON): the config, per-step loss / ms / tokens_per_second / timed, the
median tokens/s over the timed steps, the torch version, the device name,
whether AdamW was fused and which attention ran, and the device's peak
allocated bytes.

  python3 gpt2_torch_peer.py --mode=compile --batch_size=16 --steps=13 --warmup=3 --out=x.json
  python3 gpt2_torch_peer.py --device=cpu --tiny --steps=2 --warmup=1 --out=x.json  # a test
"""

import argparse
import inspect
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--tiny", action="store_true",
                   help="a tiny model (V 256, D 64, 2 layers, 4 heads, T 32) for a CPU test")
    p.add_argument("--vocab_size", type=int, default=50304)
    p.add_argument("--d_model", type=int, default=768)
    p.add_argument("--n_layers", type=int, default=12)
    p.add_argument("--n_heads", type=int, default=12)
    p.add_argument("--seq_len", type=int, default=1024)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--steps", type=int, default=13, help="steps in all, warm-up included")
    p.add_argument("--warmup", type=int, default=3, help="first steps not timed")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", default="", help="result JSON path")
    a = p.parse_args(argv)
    if a.tiny:
        a.vocab_size, a.d_model, a.n_layers, a.n_heads, a.seq_len = 256, 64, 2, 4, 32
        a.batch_size = min(a.batch_size, 4)
    for name in ("vocab_size", "d_model", "n_layers", "n_heads", "seq_len", "batch_size",
                 "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name}={getattr(a, name)} must be at least 1")
    if a.d_model % a.n_heads:
        p.error(f"--n_heads={a.n_heads} must divide --d_model={a.d_model}")
    if not 0 <= a.warmup < a.steps:
        p.error(f"--warmup={a.warmup} must be in [0, --steps={a.steps})")
    return a


class Block(nn.Module):
    def __init__(self, d, n_heads, attention):
        super().__init__()
        self.n_heads = n_heads
        self.attention = attention
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def attend(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        heads = lambda z: z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
        return self.attn_proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attend(self.ln1(x))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x))))  # exact (erf) GELU


class Gpt(nn.Module):
    def __init__(self, a, attention):
        super().__init__()
        self.wte = nn.Embedding(a.vocab_size, a.d_model)
        self.wpe = nn.Embedding(a.seq_len, a.d_model)
        self.blocks = nn.ModuleList(Block(a.d_model, a.n_heads, attention)
                                    for _ in range(a.n_layers))
        self.ln_f = nn.LayerNorm(a.d_model, eps=1e-5)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, tokens, targets):
        t = tokens.size(1)
        x = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def make_optimizer(model, a, device):
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "wte" not in n
             and "wpe" not in n]
    rest = [p for n, p in model.named_parameters() if not any(p is q for q in decay)]
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    kwargs = {"lr": a.lr, "betas": (0.9, 0.999), "eps": 1e-8}
    params = inspect.signature(torch.optim.AdamW).parameters
    fused = "fused" in params and device.type == "cuda"
    if fused:
        kwargs["fused"] = True
    elif "foreach" in params:
        kwargs["foreach"] = True
    return torch.optim.AdamW(groups, **kwargs), fused


def main(argv):
    a = parse_args(argv)
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpt2_torch_peer: --device=cuda: no CUDA device is visible to this PyTorch",
              file=sys.stderr)
        return 2
    if a.mode == "compile" and not hasattr(torch, "compile"):
        print(f"gpt2_torch_peer: --mode=compile: PyTorch {torch.__version__} has no "
              "torch.compile", file=sys.stderr)
        return 2
    torch.manual_seed(a.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 stays fp32, as trainer_cuda
        torch.backends.cudnn.allow_tf32 = False
    attention = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "explicit"
    model = Gpt(a, attention).to(device)
    optimizer, fused = make_optimizer(model, a, device)
    step_fn = torch.compile(model) if a.mode == "compile" else model
    generator = torch.Generator(device=device)
    generator.manual_seed(a.seed)
    autocast = (lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)) \
        if a.precision == "bf16" else (lambda: torch.autocast(device_type=device.type,
                                                             enabled=False))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    tokens_per_step = a.batch_size * a.seq_len
    steps = []
    for step in range(1, a.steps + 1):
        batch = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len + 1), device=device,
                              generator=generator)
        sync()
        start = time.perf_counter()
        with autocast():
            loss = step_fn(batch[:, :-1], batch[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()  # synchronises
        sync()
        ms = (time.perf_counter() - start) * 1e3
        record = {"step": step, "loss": value, "ms": ms,
                  "tokens_per_second": tokens_per_step / (ms / 1e3), "timed": step > a.warmup}
        steps.append(record)
        print(f"step {step} loss {value:.4f} ms {ms:.1f} tokens/s "
              f"{record['tokens_per_second']:.0f}{'' if record['timed'] else ' (warm-up)'}",
              flush=True)
        if not math.isfinite(value):
            print(f"gpt2_torch_peer: step {step}: the loss is {value}", file=sys.stderr)
            return 1
    timed = [s["tokens_per_second"] for s in steps if s["timed"]]
    result = {
        "peer": "gpt2_torch_peer", "mode": a.mode, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch_version": torch.__version__, "precision": a.precision,
        "fused_adamw": fused, "attention": attention,
        "config": {k: getattr(a, k) for k in ("vocab_size", "d_model", "n_layers", "n_heads",
                                              "seq_len", "batch_size", "steps", "warmup",
                                              "lr", "weight_decay", "seed")},
        "parameters": sum(p.numel() for p in model.parameters()),
        "tokens_per_step": tokens_per_step,
        "steps": steps,
        "median_tokens_per_second": statistics.median(timed),
        "max_memory_allocated_bytes":
            torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0,
    }
    print(f"median tokens/s over {len(timed)} timed steps: "
          f"{result['median_tokens_per_second']:.0f} ({a.mode}, {attention} attention, "
          f"{'fused' if fused else 'unfused'} AdamW, torch {torch.__version__})")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
