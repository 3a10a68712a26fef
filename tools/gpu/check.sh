#!/usr/bin/env bash
# The trainer's GPU check: one script, builds nothing, at most a few minutes.
# Run on the GPU machine from a copy of the checkout that carries the binary
# built here (docs/gpu.md):
#
#   tools/gpu/prepare.sh     # builds and copies tools/gpu/bin, writes tools/gpu/refs
#   # on the GPU machine:
#   tools/gpu/check.sh OUT_DIR
#
# Writes everything into OUT_DIR: the machine (nvidia-smi, ldd), each run's
# result JSON and log, and checks.txt with one line per check ("PASS name
# observed bound" or "FAIL ..."). Exit 0 when every check passes, 1 otherwise,
# 2 on bad usage.
#
# Checks:
#   kernels   every kernel of the CUDA path on the reference folder's inputs
#             (tools/gpu/refs, fp64 outputs of LibTorch's ops made here): the
#             max |GPU - reference| of each output within its derived fp32
#             bound (kernels.txt, one line per output; docs/gpu.md);
#   planted   the same with a planted off-by-one in the causal softmax must
#             fail (exit 1, FAIL on causal_softmax_forward/att);
#   refusal   a flag the CUDA path does not implement exits 2;
#   small     20 fp32 steps of a small model: every loss within 1e-4 of the
#             CPU trainer's (cpu_losses_small.txt, made here by the LibTorch
#             trainer with the same flags). The bound is a budget, not yet a
#             derivation: the CPU trainer's own two BLAS backends differ by
#             2.4e-7 on these losses' scale (testdata/golden_losses_tiny*.txt),
#             and the GPU sums in other orders (warp trees, atomics for the
#             token embedding's gradient) over 20 AdamW steps;
#   gpt2      GPT-2 124M shapes (V 50304, D 768, 12 layers, 12 heads, T 1024,
#             B 4), fp32, 12 steps: finishes with a finite, falling loss;
#             its tokens/s are recorded, not judged.
set -u
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
out="$1"
here="$(cd "$(dirname "$0")" && pwd)"
bin="${TRAINER_CUDA:-$here/bin/trainer_cuda}"
mkdir -p "$out" || exit 2
[[ -x "$bin" ]] || { echo "$0: no trainer_cuda at $bin (see the header)" >&2; exit 2; }
checks="$out/checks.txt"
: > "$checks"
failed=0
record() {  # record PASS|FAIL name details...
  echo "$*" | tee -a "$checks"
  [[ "$1" == PASS ]] || failed=$((failed + 1))
}

nvidia-smi > "$out/nvidia-smi.txt" 2>&1
ldd "$bin" > "$out/ldd.txt" 2>&1

kcheck="${KERNEL_CHECK:-$here/bin/kernel_check}"
refs="${KERNEL_REFS:-$here/refs}"
if [[ ! -x "$kcheck" || ! -f "$refs/manifest.txt" ]]; then
  record FAIL kernels "no kernel_check at $kcheck or no references at $refs (see the header)"
else
  code=0
  timeout 30 "$kcheck" "$refs" > "$out/kernels.txt" 2>&1 || code=$?
  bad=$(grep -c '^FAIL' "$out/kernels.txt")
  good=$(grep -c '^PASS' "$out/kernels.txt")
  if [[ $code == 0 && $bad == 0 && $good -gt 0 ]]; then
    record PASS kernels "$good outputs within their fp32 bounds (kernels.txt)"
  else
    record FAIL kernels "exit $code, $bad outputs failed, $good passed (kernels.txt)"
  fi
  code=0
  timeout 30 "$kcheck" --plant_off_by_one "$refs" > "$out/kernels_planted.txt" 2>&1 || code=$?
  if [[ $code == 1 ]] && grep -q '^FAIL causal_softmax_forward/att ' "$out/kernels_planted.txt"; then
    record PASS planted "the planted off-by-one fails (kernels_planted.txt)"
  else
    record FAIL planted "exit $code, want 1 with causal_softmax_forward/att failing (kernels_planted.txt)"
  fi
fi

small=(--strategy=single --nproc=1 --data=synthetic --vocab_size=256 --d_model=64
       --n_layers=2 --n_heads=4 --seq_len=32 --batch_size=4 --steps=20
       --timing_warmup_steps=2 --lr=1e-3 --seed=1234 --nomarkdown)

code=0
timeout 60 "$bin" "${small[@]}" --fault=nan:rank=0,step=2 > "$out/refusal.log" 2>&1 || code=$?
if [[ $code == 2 ]]; then record PASS refusal "exit 2"; else record FAIL refusal "exit $code, want 2"; fi

code=0
timeout 120 "$bin" "${small[@]}" --out="$out/small.json" > "$out/small.log" 2>&1 || code=$?
if [[ $code != 0 ]]; then
  record FAIL small "trainer_cuda exited $code (small.log)"
else
  verdict=$(python3 - "$out/small.json" "$here/cpu_losses_small.txt" <<'PY'
import json, sys
gpu = [s["loss"] for s in json.load(open(sys.argv[1]))["runs"][0]["steps"]]
cpu = [float(l.split()[1]) for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
bound = 1e-4
if len(gpu) != len(cpu):
    print(f"FAIL small {len(gpu)} losses, want {len(cpu)}"); sys.exit()
worst = max(range(len(cpu)), key=lambda i: abs(gpu[i] - cpu[i]))
err = abs(gpu[worst] - cpu[worst])
state = "PASS" if err <= bound else "FAIL"
print(f"{state} small max|gpu-cpu|={err:.3g} at step {worst + 1} (gpu {gpu[worst]!r}, cpu {cpu[worst]!r}) bound {bound}")
PY
)
  record $verdict
fi

code=0
timeout 150 "$bin" --strategy=single --nproc=1 --data=synthetic --vocab_size=50304 \
  --d_model=768 --n_layers=12 --n_heads=12 --seq_len=1024 --batch_size=4 --steps=12 \
  --timing_warmup_steps=2 --nomarkdown --out="$out/gpt2.json" > "$out/gpt2.log" 2>&1 || code=$?
if [[ $code != 0 ]]; then
  record FAIL gpt2 "trainer_cuda exited $code (gpt2.log)"
else
  record $(python3 - "$out/gpt2.json" <<'PY'
import json, math, sys
run = json.load(open(sys.argv[1]))["runs"][0]
losses = [s["loss"] for s in run["steps"]]
ok = all(math.isfinite(l) for l in losses) and losses[-1] < losses[0]
print(("PASS" if ok else "FAIL"), "gpt2", f"loss {losses[0]:.4f}->{losses[-1]:.4f}",
      f"tokens/s {run.get('tokens_per_second', 0):.0f}")
PY
)
fi

echo "$failed check(s) failed; results in $out"
[[ $failed == 0 ]]
