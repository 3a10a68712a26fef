#!/usr/bin/env python3
"""The Python side of //trainer/checkpoint:safetensors_export_test.

Reads `ckpt_tool export --format=safetensors` directories with its own
safetensors reader (struct + json: transformers and safetensors cannot be
installed here), checks the format, the Hugging Face GPT-2 names, Conv1D's
(in, out) orientation and config.json, then

  1. runs GPT-2's forward as transformers' GPT2LMHeadModel computes it
     (Conv1D: addmm(b, x, W) with W (in, out); the activation config.json
     names; its layer_norm_epsilon; the tied head), written here with plain
     torch ops, and gets the C++ model's logits and loss on the same batch
     within the fp32 bounds derived below;
  2. transposes the four projection weights back to nn.Linear's (out, in) and
     runs trainer/testdata/reference_gpt.py's forward, whose operations are
     the C++ model's: the logits must be equal bit for bit;
  3. checks the bf16 export is the fp32 one rounded to bf16.

Usage: /usr/bin/python3 safetensors_check.py REFERENCE_GPT_PY FP32_DIR BF16_DIR
           BATCH_PT
"""

import importlib.util
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2)}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
          "mlp.c_proj.weight")
FP32_UNIT_ROUNDOFF = 2.0**-24


def read_safetensors(path):
    """{name: tensor}, checking the layout as the format defines it."""
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    assert (8 + length) % 8 == 0, f"data starts at {8 + length}: not 8-byte aligned"
    header = json.loads(raw[8:8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    assert metadata.get("format") == "pt", metadata  # transformers requires it
    data = raw[8 + length:]
    tensors, covered = {}, []
    for name, info in header.items():
        assert set(info) == {"dtype", "shape", "data_offsets"}, (name, info)
        dtype, size = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        assert end - begin == math.prod(info["shape"]) * size, (name, info)
        covered.append((begin, end))
        values = bytearray(data[begin:end])
        tensors[name] = torch.frombuffer(values, dtype=dtype).reshape(info["shape"])
    covered.sort()
    assert covered[0][0] == 0 and covered[-1][1] == len(data), "the data is tiled"
    for (_, end), (begin, _) in zip(covered, covered[1:]):
        assert end == begin, "no holes, no overlaps"
    return tensors


def conv1d(x, weight, bias):
    """transformers' Conv1D: weight (in, out)."""
    out_shape = x.shape[:-1] + (weight.shape[1],)
    return torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight).view(out_shape)


ACTIVATIONS = {"gelu": F.gelu,  # transformers' "gelu": the exact erf GELU
               "gelu_new": lambda x: F.gelu(x, approximate="tanh")}


def gpt2_forward(state, config, tokens):
    """GPT2LMHeadModel's forward (eval, no cache): tokens (B, T) -> (B, T, V)."""
    p = lambda name: state["transformer." + name]
    d, heads = config["n_embd"], config["n_head"]
    eps, act = config["layer_norm_epsilon"], ACTIVATIONS[config["activation_function"]]
    batch, seq = tokens.shape
    x = F.embedding(tokens, p("wte.weight")) + p("wpe.weight")[:seq]
    causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    for layer in range(config["n_layer"]):
        h = lambda name: p(f"h.{layer}.{name}")
        a = F.layer_norm(x, (d,), h("ln_1.weight"), h("ln_1.bias"), eps)
        q, k, v = conv1d(a, h("attn.c_attn.weight"), h("attn.c_attn.bias")).split(d, dim=2)
        q, k, v = (t.view(batch, seq, heads, d // heads).transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // heads)
        scores = torch.where(causal, scores, torch.finfo(scores.dtype).min)
        y = torch.matmul(F.softmax(scores, dim=-1), v)
        y = y.transpose(1, 2).reshape(batch, seq, d)
        x = x + conv1d(y, h("attn.c_proj.weight"), h("attn.c_proj.bias"))
        m = F.layer_norm(x, (d,), h("ln_2.weight"), h("ln_2.bias"), eps)
        m = act(conv1d(m, h("mlp.c_fc.weight"), h("mlp.c_fc.bias")))
        x = x + conv1d(m, h("mlp.c_proj.weight"), h("mlp.c_proj.bias"))
    x = F.layer_norm(x, (d,), p("ln_f.weight"), p("ln_f.bias"), eps)
    return F.linear(x, p("wte.weight"))  # lm_head, tied


def main():
    reference_path, fp32_dir, bf16_dir, batch_path = sys.argv[1:5]
    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("reference_gpt", reference_path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)

    with open(os.path.join(fp32_dir, "config.json")) as f:
        config = json.load(f)
    assert config["architectures"] == ["GPT2LMHeadModel"], config
    assert config["model_type"] == "gpt2" and config["activation_function"] == "gelu", config
    assert config["layer_norm_epsilon"] == 1e-5 and config["tie_word_embeddings"], config
    d, layers = config["n_embd"], config["n_layer"]
    state = read_safetensors(os.path.join(fp32_dir, "model.safetensors"))
    expected = ["transformer.wte.weight", "transformer.wpe.weight",
                "transformer.ln_f.weight", "transformer.ln_f.bias"]
    for layer in range(layers):
        expected += [f"transformer.h.{layer}.{name}" for name in (
            "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
            "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
            "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")]
    assert sorted(state) == sorted(expected), sorted(set(state) ^ set(expected))
    assert state["transformer.wte.weight"].shape == (config["vocab_size"], d)
    assert state["transformer.wpe.weight"].shape == (config["n_positions"], d)
    # Conv1D's (in, out).
    assert state["transformer.h.0.attn.c_attn.weight"].shape == (d, 3 * d)
    assert state["transformer.h.0.mlp.c_fc.weight"].shape == (d, 4 * d)
    assert state["transformer.h.0.mlp.c_proj.weight"].shape == (4 * d, d)
    assert all(t.dtype == torch.float32 for t in state.values())

    batch = torch.load(batch_path)
    tokens, targets = batch["tokens"], batch["targets"]
    logits, loss = batch["logits"], batch["loss"]
    with torch.no_grad():
        ours = gpt2_forward(state, config, tokens)
        ours_loss = F.cross_entropy(ours.reshape(-1, ours.shape[-1]), targets.reshape(-1))
        exact = gpt2_forward({k: v.double() for k, v in state.items()}, config, tokens)

    # 1. The bounds. Both sides compute the same function in fp32; they differ
    # in the order of each projection's sums (addmm with W (in, out) against
    # linear with W (out, in)) and in the attention mask's spelling. A sum of
    # K products errs by at most gamma_K = K u / (1 - K u) of the sum of
    # absolute products; the widest sum is K = 4 d (mlp.c_proj). The logits
    # are the LM head over ln_f's output, and that LayerNorm divides out the
    # residual stream's scale, so each of the 4 L projections' relative error
    # reaches the logits at most once, plus the head's own: relative to
    # max|z|, 2 (4 L + 1) gamma_4d for the two sides together. Cross-entropy
    # moves by at most 2 max|dz| (its gradient, softmax - onehot, has L1 norm
    # <= 2).
    k = 4 * d
    gamma = k * FP32_UNIT_ROUNDOFF / (1 - k * FP32_UNIT_ROUNDOFF)
    logit_bound = 2 * (4 * layers + 1) * gamma * logits.abs().max().item()
    loss_bound = 2 * logit_bound
    logit_error = (ours - logits).abs().max().item()
    loss_error = abs(ours_loss.item() - loss.item())
    exact_error = (logits.double() - exact).abs().max().item()
    print(f"Conv1D GPT-2 vs C++: logits max |diff| {logit_error:.3g} (bound "
          f"{logit_bound:.3g}; C++ vs float64 {exact_error:.3g}), loss |diff| "
          f"{loss_error:.3g} (bound {loss_bound:.3g})")
    assert logit_error <= logit_bound, (logit_error, logit_bound)
    assert loss_error <= loss_bound, (loss_error, loss_bound)
    assert exact_error <= logit_bound / 2, (exact_error, logit_bound / 2)

    # 2. The same operations as the C++ model: bit for bit.
    params = {}
    for name, tensor in state.items():
        short = name.removeprefix("transformer.")
        if short.endswith(CONV1D):
            tensor = tensor.t().contiguous()
        params[short.removesuffix(".weight") if short in ("wte.weight", "wpe.weight")
               else short] = tensor
    cfg = {"d_model": d, "n_heads": config["n_head"], "n_layers": layers,
           "vocab_size": config["vocab_size"], "precision": "fp32"}
    with torch.no_grad():
        linear = ref.gpt_forward(params, tokens, cfg, ref.Dropout(0, 0, 0, []))
    assert torch.equal(linear, logits), (linear - logits).abs().max().item()

    # 3. bf16 = fp32 rounded.
    bf16 = read_safetensors(os.path.join(bf16_dir, "model.safetensors"))
    assert sorted(bf16) == sorted(state)
    for name, tensor in bf16.items():
        assert tensor.dtype == torch.bfloat16, (name, tensor.dtype)
        assert torch.equal(tensor, state[name].to(torch.bfloat16)), name
    with open(os.path.join(bf16_dir, "config.json")) as f:
        assert json.load(f)["torch_dtype"] == "bfloat16"
    print(f"OK: {len(state)} tensors, HF names, Conv1D orientation, logits within the bound "
          "and bit-equal through nn.Linear, bf16 = rounded fp32")


if __name__ == "__main__":
    main()
