#!/usr/bin/env python3
"""An independent PyTorch reference for //trainer:reference_test.

Written from SPEC §4 and docs/trainer.md with plain torch.nn.functional ops and
torch.optim.AdamW; it shares no code with the C++ trainer. The C++ test writes
a directory holding a manifest, the initial weights of a seeded tiny model and
three steps' batches as raw little-endian files; this script runs

  1. one forward and backward on step 1's batch: logits, loss, every gradient;
  2. three training steps: AdamW (two parameter groups), the cosine schedule
     with linear warm-up, global-norm clipping: the losses and the parameters;

and writes the results into DIR/python/ for the C++ side to compare with
AllClose. Dropout masks are rebuilt here from the documented counter-based key
(docs/trainer.md), so dropout > 0 is compared too.

Usage: /usr/bin/python3 reference_gpt.py DIR   (Debian's python3-torch 1.13)
"""

import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
STREAM_DROPOUT = 2
SITE_ATTENTION_PROBABILITIES = 0
SITE_ATTENTION_OUTPUT = 1
SITE_MLP_OUTPUT = 2


def mix64(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK64
    x ^= x >> 31
    return x


def counter_key(words):
    h = mix64((len(words) + GAMMA) & MASK64)
    for word in words:
        h = (mix64(h ^ (word & MASK64)) + GAMMA) & MASK64
    return h


def draw(key, counter):
    return mix64((key + (counter + 1) * GAMMA) & MASK64)


class Dropout:
    """Inverted dropout whose masks come from (seed, step, sample, layer, site)."""

    def __init__(self, p, seed, step, samples):
        self.p, self.seed, self.step, self.samples = p, seed, step, samples

    def __call__(self, x, layer, site):
        if self.p == 0:
            return x
        threshold = int(self.p * 2.0**64)
        per_sample = x[0].numel()
        rows = []
        for sample in self.samples:
            key = counter_key(
                [self.seed, STREAM_DROPOUT, self.step, sample, layer, site])
            rows.append([draw(key, e) >= threshold for e in range(per_sample)])
        keep = torch.tensor(rows, dtype=torch.bool).reshape(x.shape)
        return x * keep / (1.0 - self.p)


def gpt_forward(params, tokens, cfg, dropout):
    """tokens (B, T) int64 -> logits (B, T, V)."""
    batch, seq = tokens.shape
    d, heads = cfg["d_model"], cfg["n_heads"]
    head_dim = d // heads
    x = F.embedding(tokens, params["wte"]) + params["wpe"][:seq]
    causal = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
    for layer in range(cfg["n_layers"]):
        p = lambda name: params[f"h.{layer}.{name}"]
        h = F.layer_norm(x, (d,), p("ln_1.weight"), p("ln_1.bias"), 1e-5)
        q, k, v = F.linear(h, p("attn.c_attn.weight"),
                           p("attn.c_attn.bias")).split(d, dim=2)
        q, k, v = (t.view(batch, seq, heads, head_dim).transpose(1, 2)
                   for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        attention = F.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        attention = dropout(attention, layer, SITE_ATTENTION_PROBABILITIES)
        y = (attention @ v).transpose(1, 2).reshape(batch, seq, d)
        y = F.linear(y, p("attn.c_proj.weight"), p("attn.c_proj.bias"))
        x = x + dropout(y, layer, SITE_ATTENTION_OUTPUT)
        h = F.layer_norm(x, (d,), p("ln_2.weight"), p("ln_2.bias"), 1e-5)
        m = F.gelu(F.linear(h, p("mlp.c_fc.weight"), p("mlp.c_fc.bias")))
        m = F.linear(m, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
        x = x + dropout(m, layer, SITE_MLP_OUTPUT)
    x = F.layer_norm(x, (d,), params["ln_f.weight"], params["ln_f.bias"], 1e-5)
    return F.linear(x, params["wte"])  # tied LM head


def lr_at(step, cfg):
    lr, warmup = cfg["lr"], cfg["lr_warmup_steps"]
    if step <= warmup:
        return lr * step / warmup
    if cfg["lr_schedule"] == "constant":
        return lr
    decay, floor = cfg["lr_decay_steps"], cfg["min_lr"]
    if step >= decay:
        return floor
    ratio = (step - warmup) / (decay - warmup)
    return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - floor)


def read_tensor(directory, entry):
    dtype = {"f32": torch.float32, "i64": torch.int64}[entry["dtype"]]
    with open(os.path.join(directory, entry["file"]), "rb") as f:
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=dtype).reshape(entry["shape"]).clone()


def write_tensor(directory, name, tensor):
    """Raw little-endian float32; exact (float32 -> Python float -> float32)."""
    values = tensor.detach().to(torch.float32).reshape(-1).tolist()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(struct.pack(f"<{len(values)}f", *values))


def main():
    directory = sys.argv[1]
    torch.set_num_threads(1)
    cfg, params, names, batches = {}, {}, [], {}
    with open(os.path.join(directory, "manifest.txt")) as f:
        for line in f:
            kind, *fields = line.split()
            if kind == "config":
                key, value = fields
                cfg[key] = value if key == "lr_schedule" else float(value)
            elif kind in ("param", "batch"):
                name, dtype, file, *shape = fields
                entry = {"dtype": dtype, "file": file,
                         "shape": [int(s) for s in shape]}
                if kind == "param":
                    names.append(name)
                    params[name] = read_tensor(directory, entry)
                else:
                    batches[name] = read_tensor(directory, entry)
    for key in ("vocab_size", "d_model", "n_layers", "n_heads", "seq_len",
                "lr_warmup_steps", "lr_decay_steps", "steps", "seed"):
        cfg[key] = int(cfg[key])
    out = os.path.join(directory, "python")
    os.makedirs(out, exist_ok=True)
    for tensor in params.values():
        tensor.requires_grad_(True)

    def dropout_for(step):
        samples = list(range(batches[f"inputs_{step}"].shape[0]))
        return Dropout(cfg["dropout"], cfg["seed"], step, samples)

    # 1. Forward and backward on step 1's batch.
    logits = gpt_forward(params, batches["inputs_1"], cfg, dropout_for(1))
    loss = F.cross_entropy(logits.reshape(-1, cfg["vocab_size"]),
                           batches["targets_1"].reshape(-1))
    loss.backward()
    write_tensor(out, "logits.f32", logits)
    write_tensor(out, "loss.f32", loss.reshape(1))
    for name in names:
        write_tensor(out, f"grad.{name}.f32", params[name].grad)
        params[name].grad = None

    # 2. Training steps. No decay on biases, LayerNorm and embeddings.
    decay = [params[n] for n in names if params[n].dim() == 2
             and n not in ("wte", "wpe")]
    no_decay = [params[n] for n in names if not (params[n].dim() == 2
                and n not in ("wte", "wpe"))]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    losses = []
    for step in range(1, cfg["steps"] + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg)
        optimizer.zero_grad(set_to_none=True)
        logits = gpt_forward(params, batches[f"inputs_{step}"], cfg,
                             dropout_for(step))
        loss = F.cross_entropy(logits.reshape(-1, cfg["vocab_size"]),
                               batches[f"targets_{step}"].reshape(-1))
        loss.backward()
        if cfg["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()),
                                           cfg["max_grad_norm"])
        optimizer.step()
        losses.append(loss.item())
    write_tensor(out, "losses.f32", torch.tensor(losses))
    for name in names:
        write_tensor(out, f"final.{name}.f32", params[name])
    print(f"reference_gpt.py: {len(names)} parameters, losses {losses}")


if __name__ == "__main__":
    main()
