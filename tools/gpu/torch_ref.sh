#!/usr/bin/env bash
# Writes the reference folder of check.sh's torch_ref checks (torch_check.py)
# for its small model, here (no GPU):
#
#   tools/gpu/torch_ref.sh TRAINER CKPT_TOOL BATCH_DUMP OUT_DIR
#
# with the CPU trainer, ckpt_tool and //trainer/cuda:batch_dump binaries
# (prepare.sh passes the ones it builds; torch_check_test its data deps).
# OUT_DIR (replaced) gets:
#   cpu_run.json  the CPU trainer's one step of check.sh's small model (its
#                 flags, seed 1234) at --lr=1e-30 without clipping: steps[0]
#                 .loss is its loss on step 1's batch with the initial weights;
#   export/       that run's step-1 checkpoint exported to safetensors: the
#                 initial weights (the update at lr 1e-30 leaves every tensor
#                 but the zero biases unchanged in fp32; those become
#                 |b| <= 1e-30);
#   batch.json    step 1's global batch (batch_dump, the trainers' samples);
#   reference_fp64.pt  the loss and gradients in float64 from export/
#                 (torch_check.py reference, $PYTHON, default /usr/bin/python3).
# Exit 0 when all are written.
set -euo pipefail
if [[ $# -ne 4 ]]; then
  echo "usage: $0 TRAINER CKPT_TOOL BATCH_DUMP OUT_DIR" >&2
  exit 2
fi
trainer="$1" ckpt_tool="$2" batch_dump="$3" out="$4"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$out"
mkdir -p "$out"
ckpt="$(mktemp -d)"
trap 'rm -rf "$ckpt"' EXIT
# check.sh's small flags (seed, sizes, batch), one step.
"$trainer" --strategy=single --nproc=1 --data=synthetic --vocab_size=256 --d_model=64 \
  --n_layers=2 --n_heads=4 --seq_len=32 --batch_size=4 --seed=1234 --nomarkdown \
  --intra_op_threads=1 --steps=1 --lr=1e-30 --max_grad_norm=0 --save_every=1 \
  --checkpoint_dir="$ckpt/run" --out="$out/cpu_run.json" > "$out/cpu_run.log" 2>&1 \
  || { echo "$0: the CPU trainer failed ($out/cpu_run.log)" >&2; exit 1; }
"$ckpt_tool" export "$ckpt/run/step_00000001" --format=safetensors --out="$out/export" > /dev/null
"$batch_dump" 1234 256 32 4 1 > "$out/batch.json"
"${PYTHON:-/usr/bin/python3}" "$here/torch_check.py" reference "$out"
