#!/usr/bin/env python3
"""The same initial weights in PyTorch and in transformers' GPT2LMHeadModel.

tools/gpu/torch_ref.sh writes, here, a reference folder REF_DIR for check.sh's
small model: export/ (the CPU trainer's step-1 checkpoint at --lr=1e-30,
i.e. its initial weights, exported by `ckpt_tool export --format=safetensors`),
batch.json (step 1's global batch, from //trainer/cuda:batch_dump, the
samples both trainers draw), cpu_run.json (the CPU trainer's result: its
step-1 loss on that batch) and, by `torch_check.py reference REF_DIR` with
/usr/bin/python3 (PyTorch 1.13, CPU), reference_fp64.pt: the loss and every
parameter's gradient on that batch computed in float64 from the export. The
CPU trainer keeps no gradients outside its step, so the gradients' reference
is this float64 computation, not the trainer's.

`torch_check.py check REF_DIR [--device=cuda] [--cuda_result=small.json]`
(on the GPU machine, from check.sh; on the CPU in torch_check_test) builds
the model in plain PyTorch from the export -- GPT2LMHeadModel's forward as
trainer/checkpoint/testdata/safetensors_check.py writes it (Conv1D (in, out)
projections, exact GELU, LayerNorm epsilon 1e-5, the head tied to wte), which
safetensors_export_test proves equal to the C++ model's logits -- computes
the loss and its gradients in float32 (TF32 off) on the device and prints one
line per check, as check.sh records them:

  torch_loss   |torch fp32 - CPU trainer| within 2 E_loss (two fp32 sides);
  torch_grads  max over every parameter of |torch fp32 grad - fp64 grad|
               within E_grad (one fp32 side against float64);
  hf_gpt2      transformers' GPT2LMHeadModel.from_pretrained(export/) on the
               same tokens (fp32, eager attention): |its loss - CPU trainer|
               within 2 E_loss; SKIP when transformers does not import;
  hf_gpt2_grads  its parameters' gradients against the fp64 ones within
               E_grad (the tied lm_head counted once, as wte);
  torch_cuda   with --cuda_result: trainer_cuda's step-1 loss (steps[0].loss,
               the same initial weights and batch) against torch's within
               1e-4, check.sh's small budget.

The bounds (docs/gpu.md "PyTorch and transformers on the same weights"):
u = 2^-24, gamma(n) = n u / (1 - n u), K = 4 d (the widest inner product,
mlp.c_proj), L layers, V vocabulary, N = B T tokens, z the fp64 logits.
  E_z    = (4 L + 1) gamma(K) max|z|: one fp32 forward's logits against the
           exact ones (safetensors_check.py's argument for one side: each of
           the 4 L projections' relative error reaches the logits at most once
           through ln_f, plus the head's own);
  E_loss = 2 E_z + gamma(V) + gamma(N) |loss|: cross-entropy moves by at most
           2 max|dz| (its gradient's L1 norm is <= 2), the log-sum-exp's sum of
           V terms and the mean over N tokens add their own roundings;
  E_grad = 2 (4 L + 2) gamma(max(K, N)) max|g|: a budget, not a proof. Every
           gradient is the forward's chain of products run backward (at most
           4 L + 2 projections and their transposes, twice: activations and
           their gradients) and a sum over the N tokens; relative to the
           model's largest gradient element, not each element's own size,
           since a sum of N terms that cancel is only accurate relative to its
           terms.
The export's biases are the step's updates at --lr=1e-30 (|b| <= 1e-30, the
other tensors are unchanged in fp32), against the zeros the trainers' step 1
used: a change of the loss below 1e-28, far under every bound.

  --plant=transpose_c_proj   transposes every block's attn.c_proj weight
                             (square, so it still loads): a mapping error the
                             checks must catch (torch_check_test's negative
                             case). Exit 0 when no check failed, 1 otherwise,
                             2 on bad usage.
"""

import argparse
import importlib.util
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
SAFETENSORS_CHECK = os.path.join(HERE, "..", "..", "trainer", "checkpoint", "testdata",
                                 "safetensors_check.py")
U = 2.0**-24
SMALL_BUDGET = 1e-4  # check.sh's small check


def gamma(n):
    return n * U / (1 - n * U)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def read_inputs(ref_dir):
    st = load_module(os.environ.get("SAFETENSORS_CHECK", SAFETENSORS_CHECK), "safetensors_check")
    export = os.path.join(ref_dir, "export")
    with open(os.path.join(export, "config.json")) as f:
        config = json.load(f)
    state = st.read_safetensors(os.path.join(export, "model.safetensors"))
    with open(os.path.join(ref_dir, "batch.json")) as f:
        rows = torch.tensor(json.load(f)["tokens"], dtype=torch.int64)
    with open(os.path.join(ref_dir, "cpu_run.json")) as f:
        cpu_loss = json.load(f)["runs"][0]["steps"][0]["loss"]
    return st, export, config, state, rows[:, :-1].contiguous(), rows[:, 1:].contiguous(), cpu_loss


def loss_and_grads(st, config, state, tokens, targets, dtype, device):
    """(loss, logits, {name: grad}) of GPT2LMHeadModel's forward in `dtype`."""
    params = {k: v.to(device=device, dtype=dtype).requires_grad_(True) for k, v in state.items()}
    tokens, targets = tokens.to(device), targets.to(device)
    # safetensors_check's forward makes its causal mask with the default
    # device: the device's (torch 2.x) when it is not the CPU.
    if device != "cpu":
        torch.set_default_device(device)
    try:
        logits = st.gpt2_forward(params, config, tokens)
    finally:
        if device != "cpu":
            torch.set_default_device("cpu")
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    grads = torch.autograd.grad(loss, list(params.values()))
    return (loss.item(), logits.detach(),
            {k: g.detach().to("cpu", torch.float64) for k, g in zip(params, grads)})


def bounds(config, tokens, loss64, logits_abs_max, grad_abs_max):
    d, layers, vocab = config["n_embd"], config["n_layer"], config["vocab_size"]
    k, n = 4 * d, tokens.numel()
    e_z = (4 * layers + 1) * gamma(k) * logits_abs_max
    e_loss = 2 * e_z + gamma(vocab) + gamma(n) * abs(loss64)
    e_grad = 2 * (4 * layers + 2) * gamma(max(k, n)) * grad_abs_max
    return e_loss, e_grad


def reference(args):
    st, _, config, state, tokens, targets, cpu_loss = read_inputs(args.ref_dir)
    torch.set_num_threads(1)
    loss, logits, grads = loss_and_grads(st, config, state, tokens, targets, torch.float64, "cpu")
    out = {"loss": torch.tensor(loss, dtype=torch.float64),
           "logits_abs_max": logits.abs().max().to(torch.float64)}
    out.update({"grad/" + k: v for k, v in grads.items()})
    torch.save(out, os.path.join(args.ref_dir, "reference_fp64.pt"))
    print(f"reference: fp64 loss {loss!r} (CPU trainer fp32 {cpu_loss!r}), "
          f"{len(grads)} gradients, max|z| {out['logits_abs_max'].item():.4g}")
    return 0


def check(args):
    lines = []
    st, export, config, state, tokens, targets, cpu_loss = read_inputs(args.ref_dir)
    ref = torch.load(os.path.join(args.ref_dir, "reference_fp64.pt"), map_location="cpu")
    loss64 = ref["loss"].item()
    grads64 = {k[len("grad/"):]: v for k, v in ref.items() if k.startswith("grad/")}
    grad_abs_max = max(g.abs().max().item() for g in grads64.values())
    e_loss, e_grad = bounds(config, tokens, loss64, ref["logits_abs_max"].item(), grad_abs_max)
    device = args.device
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            print(f"FAIL torch_loss PyTorch {torch.__version__} sees no CUDA device")
            return 1
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    where = f"{device}, torch {torch.__version__}"
    if args.plant == "transpose_c_proj":
        for name in list(state):
            if name.endswith("attn.c_proj.weight"):
                state[name] = state[name].t().contiguous()

    loss32, _, grads32 = loss_and_grads(st, config, state, tokens, targets, torch.float32, device)
    err = abs(loss32 - cpu_loss)
    lines.append(f"{'PASS' if err <= 2 * e_loss else 'FAIL'} torch_loss "
                 f"max|torch fp32 - cpu trainer|={err:.3g} ({where}; torch {loss32!r}, "
                 f"cpu {cpu_loss!r}, fp64 {loss64!r}) bound {2 * e_loss:.3g}")
    worst = max(grads64, key=lambda k: (grads32[k] - grads64[k]).abs().max().item())
    err = (grads32[worst] - grads64[worst]).abs().max().item()
    lines.append(f"{'PASS' if err <= e_grad else 'FAIL'} torch_grads "
                 f"max|torch fp32 grad - fp64|={err:.3g} over {len(grads64)} tensors "
                 f"(worst {worst}; max|g| {grad_abs_max:.3g}) bound {e_grad:.3g}")

    try:
        import transformers
    except Exception as error:  # not installed, or broken: no verdict
        lines.append(f"SKIP hf_gpt2 transformers does not import ({type(error).__name__})")
    else:
        try:
            model = transformers.GPT2LMHeadModel.from_pretrained(
                export, torch_dtype=torch.float32, attn_implementation="eager")
        except TypeError:  # a transformers before attn_implementation
            model = transformers.GPT2LMHeadModel.from_pretrained(export, torch_dtype=torch.float32)
        model = model.to(device).eval()
        logits = model(input_ids=tokens.to(device)).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                               targets.to(device).reshape(-1))
        hf_params = dict(model.named_parameters())  # the tied lm_head once, as wte
        missing = sorted(set(grads64) - set(hf_params))
        hf_grads = dict(zip(hf_params, torch.autograd.grad(loss, list(hf_params.values()))))
        hf, version = loss.item(), f"transformers {transformers.__version__}, {device}"
        err = abs(hf - cpu_loss)
        lines.append(f"{'PASS' if err <= 2 * e_loss else 'FAIL'} hf_gpt2 "
                     f"max|GPT2LMHeadModel - cpu trainer|={err:.3g} ({version}; "
                     f"hf {hf!r}) bound {2 * e_loss:.3g}")
        if missing:
            lines.append(f"FAIL hf_gpt2_grads GPT2LMHeadModel has no {missing[:3]}")
        else:
            diff = {k: (hf_grads[k].to("cpu", torch.float64) - grads64[k]).abs().max().item()
                    for k in grads64}
            worst = max(diff, key=diff.get)
            lines.append(f"{'PASS' if diff[worst] <= e_grad else 'FAIL'} hf_gpt2_grads "
                         f"max|GPT2LMHeadModel grad - fp64|={diff[worst]:.3g} over "
                         f"{len(diff)} tensors (worst {worst}; {version}) bound {e_grad:.3g}")

    if args.cuda_result:
        try:
            with open(args.cuda_result) as f:
                cuda_loss = json.load(f)["runs"][0]["steps"][0]["loss"]
        except (OSError, ValueError, KeyError, IndexError) as error:
            lines.append(f"FAIL torch_cuda no step-1 loss in {args.cuda_result} ({error})")
        else:
            err = abs(cuda_loss - loss32)
            lines.append(f"{'PASS' if err <= SMALL_BUDGET else 'FAIL'} torch_cuda "
                         f"max|trainer_cuda step 1 - torch fp32|={err:.3g} (trainer_cuda "
                         f"{cuda_loss!r}) bound {SMALL_BUDGET:g}")
    for line in lines:
        print(line)
    return 1 if any(line.startswith("FAIL") for line in lines) else 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("reference", "check"))
    parser.add_argument("ref_dir")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cuda_result", default="")
    parser.add_argument("--plant", choices=("", "transpose_c_proj"), default="")
    args = parser.parse_args(argv[1:])
    for name in ("export/model.safetensors", "export/config.json", "batch.json", "cpu_run.json") + (
            ("reference_fp64.pt",) if args.mode == "check" else ()):
        if not os.path.exists(os.path.join(args.ref_dir, name)):
            print(f"torch_check.py: REF_DIR={args.ref_dir} has no {name} (tools/gpu/torch_ref.sh "
                  "makes it)", file=sys.stderr)
            return 2
    return reference(args) if args.mode == "reference" else check(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
