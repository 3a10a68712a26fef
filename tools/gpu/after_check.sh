#!/usr/bin/env bash
# The GPU check's checkpoint checks that need this machine (LibTorch, the CPU
# trainer): run here on the OUT_DIR a GPU run of tools/gpu/check.sh brought
# back, after `./bazelw build //trainer //ckpt_tool` (or with $TRAINER and
# $CKPT_TOOL naming the binaries):
#
#   tools/gpu/after_check.sh OUT_DIR
#
# Appends to OUT_DIR/checks.txt (one line per check, as check.sh):
#   ckpt_verify   ckpt_tool verify of the GPU's step-10 checkpoint;
#   ckpt_compare  ckpt_tool compare of the GPU's step-20 checkpoints, the
#                 continuous one and the resumed one: equal (tolerance 0);
#   zero1_compare ckpt_tool verify of the GPU's zero1 step-10 checkpoint
#                 (check.sh's zero1_resume, written through the multi-GPU
#                 path at world size 1) and ckpt_tool compare with the single
#                 run's step-10 checkpoint: the same logical tensors bit for
#                 bit (tolerance 0);
#   cpu_resume    the CPU trainer resumes the GPU's step-10 checkpoint
#                 (--strategy=single, the same flags) to step 20: its losses
#                 of steps 11..20 within 1e-4 of the GPU's continuous run, the
#                 small check's budget (the two devices sum in other orders).
# Then rewrites OUT_DIR/gpu_train.json and .md (write_results.py) with them.
# Exit 0 when all four pass, 1 otherwise, 2 on bad usage.
set -u
if [[ $# -ne 1 || ! -d "$1/ckpt_resume" ]]; then
  echo "usage: $0 OUT_DIR (a GPU run's folder, with ckpt_resume/ and ckpt_cont/)" >&2
  exit 2
fi
out="$1"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
trainer="${TRAINER:-$root/bazel-bin/trainer/trainer}"
ckpt_tool="${CKPT_TOOL:-$root/bazel-bin/ckpt_tool/ckpt_tool}"
for binary in "$trainer" "$ckpt_tool"; do
  [[ -x "$binary" ]] || { echo "$0: no $binary (see the header)" >&2; exit 2; }
done
checks="$out/checks.txt"
failed=0
record() {  # record PASS|FAIL name details...
  echo "$*" | tee -a "$checks"
  [[ "$1" == PASS ]] || failed=$((failed + 1))
}

step10="$out/ckpt_resume/step_00000010"
if "$ckpt_tool" verify "$step10" > "$out/after_verify.txt" 2>&1; then
  record PASS ckpt_verify "ckpt_tool verify $step10 (after_verify.txt)"
else
  record FAIL ckpt_verify "ckpt_tool verify $step10 failed (after_verify.txt)"
fi
if "$ckpt_tool" compare "$out/ckpt_cont/step_00000020" "$out/ckpt_resume/step_00000020" \
    > "$out/after_compare.txt" 2>&1; then
  record PASS ckpt_compare "the continuous and resumed step-20 checkpoints are equal (after_compare.txt)"
else
  record FAIL ckpt_compare "the continuous and resumed step-20 checkpoints differ (after_compare.txt)"
fi

zero1="$out/ckpt_zero1/step_00000010"
if "$ckpt_tool" verify "$zero1" > "$out/after_zero1_verify.txt" 2>&1 &&
   "$ckpt_tool" compare "$zero1" "$step10" > "$out/after_zero1_compare.txt" 2>&1; then
  record PASS zero1_compare "the zero1 step-10 checkpoint verifies and equals single's (after_zero1_compare.txt)"
else
  record FAIL zero1_compare "ckpt_tool verify or compare of $zero1 failed (after_zero1_verify.txt, after_zero1_compare.txt)"
fi

# check.sh's small run with its fixed schedule, resumed on the CPU.
cpu_dir="$(mktemp -d)"
code=0
"$trainer" --strategy=single --nproc=1 --data=synthetic --vocab_size=256 --d_model=64 \
  --n_layers=2 --n_heads=4 --seq_len=32 --batch_size=4 --steps=20 --timing_warmup_steps=2 \
  --lr=1e-3 --seed=1234 --nomarkdown --intra_op_threads=1 --lr_warmup_steps=2 \
  --lr_decay_steps=20 --save_every=10 --checkpoint_dir="$cpu_dir" --resume="$step10" \
  --out="$out/after_cpu_resume.json" > "$out/after_cpu_resume.log" 2>&1 || code=$?
rm -rf "$cpu_dir"
if [[ $code != 0 ]]; then
  record FAIL cpu_resume "the CPU trainer exited $code resuming $step10 (after_cpu_resume.log)"
else
  record $(python3 - "$out/after_cpu_resume.json" "$out/resume_cont.json" <<'PY'
import json, sys
cpu, gpu = ({s["step"]: s["loss"] for s in json.load(open(p))["runs"][0]["steps"]}
            for p in sys.argv[1:3])
bound = 1e-4
if sorted(cpu) != list(range(11, 21)):
    print("FAIL cpu_resume", f"the CPU trained steps {sorted(cpu)}, want 11..20"); sys.exit()
err = max(abs(cpu[s] - gpu[s]) for s in cpu)
print("PASS" if err <= bound else "FAIL", "cpu_resume",
      f"max|cpu resumed - gpu continuous|={err:.3g} over steps 11..20 bound {bound}")
PY
)
fi
# The results file again, with these lines.
python3 "$here/write_results.py" "$out" || failed=$((failed + 1))
[[ $failed == 0 ]]
