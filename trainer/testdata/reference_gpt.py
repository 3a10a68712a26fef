#!/usr/bin/env python3
"""An independent PyTorch reference for //trainer:reference_test.

Written from docs/trainer.md with plain torch.nn.functional ops and
torch.optim.AdamW; it shares no code with the C++ trainer. The C++ test writes
DIR/manifest.txt (the configuration only); this script, on one intra-op thread,

  1. builds the GPT-2 initialisation itself from the documented counter keys
     (seed, 3, parameter index) and Box-Muller, in nanoGPT's parameter order;
  2. draws every step's global batch itself from the keys (seed, 1, step,
     sample);
  3. runs one forward and backward on step 1's first micro-batch: logits, loss,
     every gradient;
  4. trains `steps` steps: `grad_accum` micro-batches per step (loss / K
     backward each), global-norm clipping, the cosine schedule with linear
     warm-up, AdamW with two parameter groups: the losses and the parameters;

and writes its initialisation, batches and results into DIR/python/ for the C++
side to compare with its own. Dropout masks are rebuilt from the documented
counter-based key, so dropout > 0 is compared too. precision bf16 runs the
forward under CPU autocast (bf16, weight-cast cache off) with LayerNorm and the
cross-entropy in fp32, as docs/trainer.md describes. Activation checkpointing
is not reproduced: recomputation must change nothing, so this plain forward is
its reference.

Usage: /usr/bin/python3 reference_gpt.py DIR   (Debian's python3-torch 1.13)
"""

import contextlib
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
STREAM_DATA = 1
STREAM_DROPOUT = 2
STREAM_INIT = 3
SITE_ATTENTION_PROBABILITIES = 0
SITE_ATTENTION_OUTPUT = 1
SITE_MLP_OUTPUT = 2
INIT_STD = 0.02
TWO_TO_MINUS_53 = 2.0**-53


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


def counter_below(key, counter, n):
    return (draw(key, counter) * n) >> 64


def counter_normal(key, counter):
    """Box-Muller from draws 2c and 2c + 1, in float64 as the spec writes it."""
    u1 = ((draw(key, 2 * counter) >> 11) + 1) * TWO_TO_MINUS_53
    u2 = (draw(key, 2 * counter + 1) >> 11) * TWO_TO_MINUS_53
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def gpt2_init(cfg):
    """[(name, tensor)] in nanoGPT's order; weight i draws from (seed, 3, i)."""
    vocab, d, layers, seq = (cfg["vocab_size"], cfg["d_model"],
                             cfg["n_layers"], cfg["seq_len"])
    residual_std = INIT_STD / math.sqrt(2.0 * layers)
    spec = [("wte", (vocab, d), INIT_STD), ("wpe", (seq, d), INIT_STD)]
    for layer in range(layers):
        p = f"h.{layer}."
        spec += [(p + "ln_1.weight", (d,), "ones"),
                 (p + "ln_1.bias", (d,), "zeros"),
                 (p + "attn.c_attn.weight", (3 * d, d), INIT_STD),
                 (p + "attn.c_attn.bias", (3 * d,), "zeros"),
                 (p + "attn.c_proj.weight", (d, d), residual_std),
                 (p + "attn.c_proj.bias", (d,), "zeros"),
                 (p + "ln_2.weight", (d,), "ones"),
                 (p + "ln_2.bias", (d,), "zeros"),
                 (p + "mlp.c_fc.weight", (4 * d, d), INIT_STD),
                 (p + "mlp.c_fc.bias", (4 * d,), "zeros"),
                 (p + "mlp.c_proj.weight", (d, 4 * d), residual_std),
                 (p + "mlp.c_proj.bias", (d,), "zeros")]
    spec += [("ln_f.weight", (d,), "ones"), ("ln_f.bias", (d,), "zeros")]
    params = []
    for index, (name, shape, init) in enumerate(spec):
        if init == "ones":
            tensor = torch.ones(shape)
        elif init == "zeros":
            tensor = torch.zeros(shape)
        else:
            key = counter_key([cfg["seed"], STREAM_INIT, index])
            values = [init * counter_normal(key, e)
                      for e in range(math.prod(shape))]
            # float64 -> float32 rounds to nearest, as static_cast<float>.
            tensor = torch.tensor(values, dtype=torch.float64).to(
                torch.float32).reshape(shape)
        params.append((name, tensor))
    return params


def synthetic_batch(cfg, step, samples):
    """(inputs, targets), each (len(samples), T) int64, from (seed, 1, s, g)."""
    seq, vocab = cfg["seq_len"], cfg["vocab_size"]
    rows = []
    for sample in samples:
        key = counter_key([cfg["seed"], STREAM_DATA, step, sample])
        rows.append([counter_below(key, t, vocab) for t in range(seq + 1)])
    tokens = torch.tensor(rows, dtype=torch.int64)
    return tokens[:, :seq].contiguous(), tokens[:, 1:].contiguous()


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
        return x * keep.to(x.dtype) / (1.0 - self.p)


def layer_norm(x, weight, bias):
    """In fp32 whatever x is (CPU autocast has no mixed-dtype LayerNorm)."""
    return F.layer_norm(x.float(), (x.shape[-1],), weight.float(),
                        bias.float(), 1e-5).to(x.dtype)


def gpt_forward(params, tokens, cfg, dropout):
    """tokens (B, T) int64 -> logits (B, T, V)."""
    batch, seq = tokens.shape
    d, heads = cfg["d_model"], cfg["n_heads"]
    head_dim = d // heads
    x = F.embedding(tokens, params["wte"]) + params["wpe"][:seq]
    causal = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
    for layer in range(cfg["n_layers"]):
        p = lambda name: params[f"h.{layer}.{name}"]
        h = layer_norm(x, p("ln_1.weight"), p("ln_1.bias"))
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
        h = layer_norm(x, p("ln_2.weight"), p("ln_2.bias"))
        m = F.gelu(F.linear(h, p("mlp.c_fc.weight"), p("mlp.c_fc.bias")))
        m = F.linear(m, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
        x = x + dropout(m, layer, SITE_MLP_OUTPUT)
    x = layer_norm(x, params["ln_f.weight"], params["ln_f.bias"])
    return F.linear(x, params["wte"])  # tied LM head


def forward_loss(params, tokens, targets, cfg, dropout):
    """(logits, loss): the forward under autocast for bf16, the loss in fp32."""
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False)
                if cfg["precision"] == "bf16" else contextlib.nullcontext())
    with autocast:
        logits = gpt_forward(params, tokens, cfg, dropout)
        loss = F.cross_entropy(logits.float().reshape(-1, cfg["vocab_size"]),
                               targets.reshape(-1))
    return logits, loss


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


def write_raw(directory, name, tensor, dtype):
    """Raw little-endian values, exactly (float32 -> Python float -> float32)."""
    code = {torch.float32: "f", torch.float64: "d", torch.int64: "q"}[dtype]
    values = tensor.detach().to(dtype).reshape(-1).tolist()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(struct.pack(f"<{len(values)}{code}", *values))


def run(cfg, out):
    """Steps 1-4 of the module docstring for `cfg`, writing into `out`."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "threads.txt"), "w") as f:
        f.write(f"{torch.get_num_threads()}\n")

    # 1. The initialisation, from the keys.
    init = gpt2_init(cfg)
    names = [name for name, _ in init]
    params = dict(init)
    with open(os.path.join(out, "names.txt"), "w") as f:
        f.write("".join(name + "\n" for name in names))
    for name, tensor in init:
        write_raw(out, f"init.{name}.f32", tensor, torch.float32)
        tensor.requires_grad_(True)

    # 2. Every step's global batch (grad_accum x batch_size samples).
    micro, accum = cfg["batch_size"], cfg["grad_accum"]
    batches = {}
    for step in range(1, cfg["steps"] + 1):
        batches[step] = synthetic_batch(cfg, step, range(micro * accum))
        write_raw(out, f"inputs_{step}.i64", batches[step][0], torch.int64)
        write_raw(out, f"targets_{step}.i64", batches[step][1], torch.int64)

    def micro_batch(step, m):
        """(inputs, targets, dropout) of micro-batch m of `step`."""
        rows = range(m * micro, (m + 1) * micro)
        dropout = Dropout(cfg["dropout"], cfg["seed"], step, list(rows))
        inputs, targets = batches[step]
        return inputs[rows.start:rows.stop], targets[rows.start:rows.stop], dropout

    # 3. Forward and backward on step 1's first micro-batch.
    inputs, targets, dropout = micro_batch(1, 0)
    logits, loss = forward_loss(params, inputs, targets, cfg, dropout)
    loss.backward()
    write_raw(out, "logits.f32", logits, torch.float32)
    write_raw(out, "loss.f32", loss.reshape(1), torch.float32)
    for name in names:
        write_raw(out, f"grad.{name}.f32", params[name].grad, torch.float32)
        params[name].grad = None

    # 4. Training steps. No decay on biases, LayerNorm and embeddings.
    decays = lambda n: params[n].dim() == 2 and n not in ("wte", "wpe")
    optimizer = torch.optim.AdamW(
        [{"params": [params[n] for n in names if decays(n)],
          "weight_decay": cfg["weight_decay"]},
         {"params": [params[n] for n in names if not decays(n)],
          "weight_decay": 0.0}],
        lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    losses = []
    for step in range(1, cfg["steps"] + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg)
        optimizer.zero_grad(set_to_none=True)
        step_loss = 0.0  # the mean over micro-batches, in float64
        for m in range(accum):
            inputs, targets, dropout = micro_batch(step, m)
            _, loss = forward_loss(params, inputs, targets, cfg, dropout)
            step_loss += loss.item() / accum
            (loss / float(accum)).backward()
        if cfg["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()),
                                           cfg["max_grad_norm"])
        optimizer.step()
        losses.append(step_loss)
    write_raw(out, "losses.f64", torch.tensor(losses, dtype=torch.float64),
              torch.float64)
    for name in names:
        write_raw(out, f"final.{name}.f32", params[name], torch.float32)
    print(f"reference_gpt.py: {cfg['precision']}, {len(names)} parameters, "
          f"losses {losses}")


def main():
    directory = sys.argv[1]
    # OpenBLAS sums in a thread-count-dependent order: one thread, as the C++
    # side, or the bits differ.
    torch.set_num_threads(1)
    cfg = {}
    with open(os.path.join(directory, "manifest.txt")) as f:
        for line in f:
            kind, key, value = line.split()
            assert kind == "config", line
            cfg[key] = value
    for key in ("vocab_size", "d_model", "n_layers", "n_heads", "seq_len",
                "batch_size", "grad_accum", "lr_warmup_steps",
                "lr_decay_steps", "steps", "seed"):
        cfg[key] = int(cfg[key])
    for key in ("dropout", "lr", "min_lr", "beta1", "beta2", "eps",
                "weight_decay", "max_grad_norm"):
        cfg[key] = float(cfg[key])
    run(cfg, os.path.join(directory, "python"))
    if cfg["precision"] == "bf16":
        # bf16 against fp32 math too, for the test's bf16 error bound.
        run(dict(cfg, precision="fp32"), os.path.join(directory, "python_fp32"))


if __name__ == "__main__":
    main()
