#!/usr/bin/env python3
"""The Python side of //trainer/checkpoint:export_test.

Loads `ckpt_tool export --format=torch` files with torch.load, checks the
Hugging Face GPT-2 names and shapes, builds the GPT in plain PyTorch
(trainer/testdata/reference_gpt.py's forward, which shares no code with the
C++ model) from the exported fp32 state dict, and checks that its logits on
the C++ side's batch equal the C++ model's bit for bit; the bf16 export must
be the fp32 one rounded to bf16.

Usage: /usr/bin/python3 export_check.py REFERENCE_GPT_PY FP32_PT BF16_PT BATCH_PT
           N_LAYERS N_HEADS
"""

import importlib.util
import sys

import torch


def main():
    reference_path, fp32_path, bf16_path, batch_path = sys.argv[1:5]
    n_layers, n_heads = int(sys.argv[5]), int(sys.argv[6])
    spec = importlib.util.spec_from_file_location("reference_gpt", reference_path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    torch.set_num_threads(1)

    state = torch.load(fp32_path)
    assert isinstance(state, dict), type(state)
    expected = ["transformer.wte.weight", "transformer.wpe.weight"]
    for layer in range(n_layers):
        expected += [f"transformer.h.{layer}.{name}" for name in (
            "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
            "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
            "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")]
    expected += ["transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight"]
    assert sorted(state) == sorted(expected), sorted(set(state) ^ set(expected))
    assert torch.equal(state["lm_head.weight"], state["transformer.wte.weight"])
    d = state["transformer.wte.weight"].shape[1]
    # nn.Linear's (out, in), not HF Conv1D's (in, out).
    assert state["transformer.h.0.attn.c_attn.weight"].shape == (3 * d, d)
    assert state["transformer.h.0.mlp.c_fc.weight"].shape == (4 * d, d)
    for name, tensor in state.items():
        assert tensor.dtype == torch.float32, (name, tensor.dtype)

    params = {}
    for name, tensor in state.items():
        if name == "lm_head.weight":
            continue
        short = name.removeprefix("transformer.")
        params[short.removesuffix(".weight") if short in ("wte.weight", "wpe.weight")
               else short] = tensor
    batch = torch.load(batch_path)
    tokens, logits = batch["tokens"], batch["logits"]
    cfg = {"d_model": d, "n_heads": n_heads, "n_layers": n_layers,
           "vocab_size": state["transformer.wte.weight"].shape[0], "precision": "fp32"}
    with torch.no_grad():
        ours = ref.gpt_forward(params, tokens, cfg, ref.Dropout(0, 0, 0, []))
    difference = (ours - logits).abs().max().item()
    print(f"logits {tuple(ours.shape)}: max |python - c++| = {difference}")
    assert torch.equal(ours, logits), difference

    bf16 = torch.load(bf16_path)
    assert sorted(bf16) == sorted(state)
    for name, tensor in bf16.items():
        assert tensor.dtype == torch.bfloat16, (name, tensor.dtype)
        assert torch.equal(tensor, state[name].to(torch.bfloat16)), name
    print(f"OK: {len(state)} tensors, HF names, logits equal, bf16 = rounded fp32")


if __name__ == "__main__":
    main()
