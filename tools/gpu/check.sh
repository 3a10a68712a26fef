#!/usr/bin/env bash
# The trainer's GPU check: one script, builds nothing, at most a few minutes.
# Run on the GPU machine from a copy of the checkout that carries the binary
# built here (docs/gpu.md):
#
#   tools/gpu/prepare.sh     # builds and copies tools/gpu/bin, writes tools/gpu/refs
#                            # and tools/gpu/torch_ref
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
#   kernels_bf16  the same for the bf16 step's kernels (bf16 activations)
#             against the bf16 bounds (kernels_bf16.txt);
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
#   small_bf16  the same 20 steps with --precision=bf16 against the CPU
#             trainer's bf16 losses (cpu_losses_small_bf16.txt) within 5e-4:
#             twice the whole effect bf16 has on these losses on the CPU
#             (max |bf16 - fp32| = 1.8e-4: a rounding that falls the other way
#             moves a value by at most twice its rounding error) plus the
#             fp32 budget (docs/gpu.md "The bf16 step");
#   torch_ref the same initial weights in the machine's PyTorch
#             (tools/gpu/torch_check.py, $PYTHON; its reference folder
#             tools/gpu/torch_ref made here by prepare.sh: the CPU trainer's
#             initial weights exported to safetensors, step 1's batch, the
#             CPU trainer's loss, float64 gradients): torch_loss (fp32 on the
#             GPU, TF32 off, against the CPU trainer's loss), torch_grads
#             (against float64), hf_gpt2 and hf_gpt2_grads (transformers'
#             GPT2LMHeadModel.from_pretrained of the export; SKIP without
#             transformers), torch_cuda (trainer_cuda's step-1 loss of the
#             small run against torch's within 1e-4), each within its bound
#             (docs/gpu.md "PyTorch and transformers on the same weights");
#   resume    checkpoints on the GPU: the small model (a fixed schedule)
#             trained 20 steps saving at 10 and 20 (ckpt_cont), and 10 steps
#             saving at 10 then resumed from `latest` to 20 (ckpt_resume):
#             the resumed steps' losses equal the continuous run's bit for bit
#             and so do the two step-20 shard files (their SHA-256 in the
#             manifests). The GPU path has no atomics, so a run repeats bit
#             for bit;
#   ckpt      the GPU's step-10 checkpoint verifies: READY, every file's size
#             and SHA-256 as its manifest says, and the tensors are the CPU
#             trainer's (model/, optimizer/exp_avg/, optimizer/exp_avg_sq/ per
#             parameter, optimizer/step), by `ckpt_tool verify` when a
#             runnable one is given ($CKPT_TOOL; ours links LibTorch, which a
#             GPU machine lacks), else by Python; tools/gpu/after_check.sh
#             OUT_DIR then runs ckpt_tool verify/compare and the CPU trainer's
#             resume of it on the build machine;
#   nccl2     two ranks over NCCL (--nproc=2 --strategy=ddp --batch_size=2:
#             the same global batch) equal one rank
#             (the small run) within 1e-4, the small check's budget (the
#             2-rank mean reassociates each gradient sum once); SKIP, not a
#             failure, on a machine with one GPU (NCCL does not run two ranks
#             on one GPU);
#   nccl2_zero1  zero1 over NCCL at two ranks (--nproc=2 --strategy=zero1
#             --batch_size=2) within 1e-4 of one rank, nccl2's budget (not bit
#             for bit: the norm sums each rank's shard, then the ranks); SKIP
#             on one GPU;
#   sync1     the multi-GPU path at world size 1 (one GPU): the small run
#             with --strategy=ddp and with --strategy=zero1 at --nproc=1 go
#             through NCCL (a communicator of one), the buckets launched
#             from backward on the collectives' stream behind the model's
#             events, zero1's reduce-scatter into the shard buffer, the norm
#             of the shard, AdamW on the shard's pieces and the all-gather:
#             every loss and gradient norm equals the single run's (small)
#             bit for bit. Derived: over one rank the average divides by 1,
#             the shard is the whole buffer summed by the same kernel and
#             partials, and AdamW is elementwise with the same arguments, so
#             any difference is a synchronisation bug (a bucket reduced
#             before its gradient was final, a shard read before the
#             reduce-scatter landed);
#   zero1_resume  checkpoints through the multi-GPU path at world size 1:
#             the resume check's fixed-schedule small model with
#             --strategy=zero1, 10 steps saving at 10 (ckpt_zero1), then
#             resumed from `latest` to 20: the manifest says zero1 and the
#             resumed steps' losses equal the single continuous run's
#             (resume_cont) bit for bit (zero1 at world size 1 is single's
#             arithmetic, sync1; its checkpoint is the zero1 format's rank 0
#             holding every shard);
#   gpu_smoke comm_bench's NCCL sweep at world size 1 (comm_bench/gpu_smoke.sh
#             with tools/gpu/bin/comm_bench_nccl): every collective, float32
#             and bfloat16, 1K..64M, results checked, and a bad flag refused;
#             its tables and results in OUT_DIR/gpu_smoke/;
#   doctor_gpu  doctor's GPU checks (tools/gpu/bin/doctor_gpu): exit 0 and
#             its result in doctor_gpu.json;
#   gpt2      GPT-2 124M shapes (V 50304, D 768, 12 layers, 12 heads, T 1024,
#             B 4), fp32, 12 steps: finishes with a finite, falling loss;
#             its tokens/s are recorded, not judged;
#   perf      GPT-2 124M shapes at bf16, B 16: trainer_cuda (which measures
#             its cuBLASLt bf16 GEMM peak first) and the PyTorch peer
#             (trainer/bench/gpt2_torch_peer.py, $PYTHON, default python3:
#             eager and torch.compile) in $PERF_ROUNDS (3) alternating rounds
#             of 13 steps, 3 of them warm-up; perf_summary.py: our runs finish
#             with finite, falling losses (PASS/FAIL), and GOAL lines, which
#             report and never fail: tokens/s >= 1.0x torch.compile's (medians
#             over rounds of each run's median over its timed steps), MFU >=
#             40% of the measured peak, no device memory allocated after
#             step 1 (perf.json); a peer that cannot run is a SKIP.
#
# With PROFILE=1 and nsys on the machine, one short run of ours under Nsight
# Systems: per-kernel times in perf_profile.txt (about 40 s more).
#
# Then write_results.py writes gpu_train.json and gpu_train.md (the results
# file for docs/figures/) into OUT_DIR.
#
# Each check prints its estimated GPU time first (H100); about 7 minutes
# expected in all (perf about 3 of them, torch.compile's first compilation
# the largest part), about 28 minutes if every check hits its timeout (a perf run
# that times out is not repeated in later rounds).
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
record() {  # record PASS|FAIL|SKIP|GOAL name details... (GOAL: reported, never a failure)
  echo "$*" | tee -a "$checks"
  [[ "$1" == PASS || "$1" == SKIP || "$1" == GOAL ]] || failed=$((failed + 1))
}
estimate() {  # estimate NAME SECONDS WORST: before a check starts
  echo "check $1: estimate ~$2 s of GPU time (at most $3 s)"
}

nvidia-smi > "$out/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.csv" 2>&1
ldd "$bin" > "$out/ldd.txt" 2>&1
cp "$here/bin/COMMIT" "$out/commit.txt" 2>/dev/null || echo unknown > "$out/commit.txt"

kcheck="${KERNEL_CHECK:-$here/bin/kernel_check}"
refs="${KERNEL_REFS:-$here/refs}"
if [[ ! -x "$kcheck" || ! -f "$refs/manifest.txt" ]]; then
  record FAIL kernels "no kernel_check at $kcheck or no references at $refs (see the header)"
else
  for precision in fp32 bf16; do
    name=kernels
    [[ $precision == bf16 ]] && name=kernels_bf16
    estimate $name 10 30
    code=0
    timeout 30 "$kcheck" --precision=$precision "$refs" > "$out/$name.txt" 2>&1 || code=$?
    bad=$(grep -c '^FAIL' "$out/$name.txt")
    good=$(grep -c '^PASS' "$out/$name.txt")
    if [[ $code == 0 && $bad == 0 && $good -gt 0 ]]; then
      record PASS $name "$good outputs within their $precision bounds ($name.txt)"
    else
      record FAIL $name "exit $code, $bad outputs failed, $good passed ($name.txt)"
    fi
  done
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

estimate refusal 1 30
code=0
timeout 30 "$bin" "${small[@]}" --fault=nan:rank=0,step=2 > "$out/refusal.log" 2>&1 || code=$?
if [[ $code == 2 ]]; then record PASS refusal "exit 2"; else record FAIL refusal "exit $code, want 2"; fi

# small_check NAME CPU_LOSSES BOUND FLAGS...: the small run's losses against
# the CPU trainer's.
small_check() {
  local name="$1" losses="$2" bound="$3"
  shift 3
  estimate $name 5 90
  code=0
  timeout 90 "$bin" "${small[@]}" "$@" --out="$out/$name.json" > "$out/$name.log" 2>&1 || code=$?
  if [[ $code != 0 ]]; then
    record FAIL $name "trainer_cuda exited $code ($name.log)"
    return
  fi
  record $(python3 - "$out/$name.json" "$losses" "$name" "$bound" <<'PY'
import json, sys
gpu = [s["loss"] for s in json.load(open(sys.argv[1]))["runs"][0]["steps"]]
cpu = [float(l.split()[1]) for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
name, bound = sys.argv[3], float(sys.argv[4])
if len(gpu) != len(cpu):
    print(f"FAIL {name} {len(gpu)} losses, want {len(cpu)}"); sys.exit()
worst = max(range(len(cpu)), key=lambda i: abs(gpu[i] - cpu[i]))
err = abs(gpu[worst] - cpu[worst])
state = "PASS" if err <= bound else "FAIL"
print(f"{state} {name} max|gpu-cpu|={err:.3g} at step {worst + 1} (gpu {gpu[worst]!r}, cpu {cpu[worst]!r}) bound {bound:g}")
PY
)
}
small_check small "$here/cpu_losses_small.txt" 1e-4
small_check small_bf16 "$here/cpu_losses_small_bf16.txt" 5e-4 --precision=bf16

# PyTorch and transformers on the same initial weights (torch_check.py, its
# reference folder made by prepare.sh): one line per check, or one FAIL when
# it cannot run.
python="${PYTHON:-python3}"
torch_ref="${TORCH_REF:-$here/torch_ref}"
estimate torch_ref 20 120
if [[ ! -f "$torch_ref/reference_fp64.pt" ]]; then
  record FAIL torch_ref "no reference at $torch_ref (see the header)"
else
  code=0
  timeout 120 "$python" "${TORCH_CHECK:-$here/torch_check.py}" check "$torch_ref" --device=cuda \
    --cuda_result="$out/small.json" > "$out/torch_check.txt" 2>&1 || code=$?
  while read -r line; do
    # shellcheck disable=SC2086
    [[ -n "$line" ]] && record $line
  done < <(grep -E '^(PASS|FAIL|SKIP) ' "$out/torch_check.txt")
  # An exit other than 0 or 1, or no torch_loss verdict (a Python error
  # also exits 1): the script itself failed.
  if [[ $code != 0 && $code != 1 ]] || ! grep -Eq '^(PASS|FAIL) torch_loss ' "$out/torch_check.txt"; then
    record FAIL torch_ref "torch_check.py exited $code (torch_check.txt)"
  fi
fi

# Checkpoints: a fixed schedule, so that a 10-step run and a 20-step run
# train the same first 10 steps.
estimate resume 15 120
fixed=("${small[@]}" --lr_warmup_steps=2 --lr_decay_steps=20 --save_every=10)
code=0
for leg in "cont --steps=20 --checkpoint_dir=$out/ckpt_cont" \
           "half --steps=10 --checkpoint_dir=$out/ckpt_resume" \
           "rest --steps=20 --checkpoint_dir=$out/ckpt_resume --resume=latest"; do
  read -r name flags <<< "$leg"
  # shellcheck disable=SC2086
  timeout 40 "$bin" "${fixed[@]}" $flags --out="$out/resume_$name.json" \
    > "$out/resume_$name.log" 2>&1 || { code=$?; record FAIL resume "the $name run exited $code (resume_$name.log)"; break; }
done
if [[ $code == 0 ]]; then
  record $(python3 - "$out" <<'PY'
import hashlib, json, os, sys
out = sys.argv[1]
def losses(name):
    steps = json.load(open(f"{out}/resume_{name}.json"))["runs"][0]["steps"]
    return {s["step"]: s["loss"] for s in steps}
def bin_sha(root):
    manifest = json.load(open(f"{root}/step_00000020/manifest.json"))
    return {f["name"]: f["sha256"] for f in manifest["files"]}["rank_00000.bin"]
cont, rest = losses("cont"), losses("rest")
tail = {s: cont[s] for s in range(11, 21)}
if sorted(rest) != sorted(tail):
    print("FAIL resume", f"the resumed run trained steps {sorted(rest)}, want 11..20"); sys.exit()
diff = [s for s in tail if rest[s] != tail[s]]
same_bits = bin_sha(f"{out}/ckpt_cont") == bin_sha(f"{out}/ckpt_resume")
if diff or not same_bits:
    worst = max((abs(rest[s] - tail[s]) for s in tail), default=0)
    print("FAIL resume", f"{len(diff)} of 10 resumed losses differ (max {worst:.3g}),",
          "step-20 shard files", "equal" if same_bits else "differ")
else:
    print("PASS resume", "steps 11..20 resumed equal the continuous run bit for bit,",
          "step-20 shard files equal")
PY
)
fi

estimate ckpt 2 30
ckpt_dir="$out/ckpt_resume/step_00000010"
ckpt_tool="${CKPT_TOOL:-}"
if [[ ! -d "$ckpt_dir" ]]; then
  record FAIL ckpt "no checkpoint at $ckpt_dir (resume_half.log)"
elif [[ -n "$ckpt_tool" ]] && timeout 30 "$ckpt_tool" verify "$ckpt_dir" > "$out/ckpt_verify.txt" 2>&1; then
  record PASS ckpt "ckpt_tool verify $ckpt_dir (ckpt_verify.txt)"
elif [[ -n "$ckpt_tool" ]]; then
  record FAIL ckpt "ckpt_tool verify $ckpt_dir failed (ckpt_verify.txt)"
else
  record $(python3 - "$ckpt_dir" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(f"{d}/manifest.json"))
bad = [] if os.path.exists(f"{d}/READY") else ["no READY"]
for f in m["files"]:
    data = open(f"{d}/{f['name']}", "rb").read()
    if len(data) != int(f["size"]) or hashlib.sha256(data).hexdigest() != f["sha256"]:
        bad.append(f"{f['name']} is not what the manifest says")
names = {t["name"] for t in m["tensors"]}
params = {n[len("model/"):] for n in names if n.startswith("model/")}
want = {f"model/{p}" for p in params} | {f"optimizer/exp_avg/{p}" for p in params} \
     | {f"optimizer/exp_avg_sq/{p}" for p in params} | {"optimizer/step"}
if not params or names != want:
    bad.append(f"tensors {sorted(names ^ want)[:4]} are not the CPU trainer's")
if bad:
    print("FAIL ckpt", "; ".join(bad))
else:
    print("PASS ckpt", f"{len(m['files'])} files as the manifest says, {len(names)} tensors",
          "(Python; ckpt_tool verify, compare and the CPU resume: tools/gpu/after_check.sh)")
PY
)
fi

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# Two ranks over NCCL, ddp (nccl2) and zero1 (nccl2_zero1): the small run's
# losses within 1e-4 of one rank's.
for strategy in ddp zero1; do
  name=nccl2
  [[ $strategy == zero1 ]] && name=nccl2_zero1
  if [[ $gpus -lt 2 ]]; then
    record SKIP $name "$gpus GPU(s) here, two needed (NCCL does not run two ranks on one GPU)"
    continue
  fi
  estimate $name 10 60
  code=0
  timeout 60 "$bin" "${small[@]}" --nproc=2 --strategy=$strategy --batch_size=2 \
    --out="$out/$name.json" > "$out/$name.log" 2>&1 || code=$?
  if [[ $code != 0 ]]; then
    record FAIL $name "trainer_cuda --nproc=2 --strategy=$strategy exited $code ($name.log)"
    continue
  fi
  record $(python3 - "$name" "$out/$name.json" "$out/small.json" <<'PY'
import json, sys
name = sys.argv[1]
two, one = ([s["loss"] for s in json.load(open(p))["runs"][0]["steps"]] for p in sys.argv[2:4])
bound = 1e-4
if len(two) != len(one):
    print("FAIL", name, f"{len(two)} losses, want {len(one)}"); sys.exit()
err = max(abs(a - b) for a, b in zip(two, one))
print("PASS" if err <= bound else "FAIL", name, f"max|2 ranks - 1 rank|={err:.3g} bound {bound}")
PY
)
done

for strategy in ddp zero1; do
  estimate "sync1 $strategy" 10 60
  code=0
  timeout 60 "$bin" "${small[@]}" --strategy=$strategy --out="$out/sync1_$strategy.json" \
    > "$out/sync1_$strategy.log" 2>&1 || code=$?
  if [[ $code != 0 ]]; then
    record FAIL "sync1_$strategy" "trainer_cuda --strategy=$strategy --nproc=1 exited $code (sync1_$strategy.log)"
    continue
  fi
  record $(python3 - "$out/sync1_$strategy.json" "$out/small.json" "$strategy" <<'PY'
import json, sys
def steps(path):
    return [(s["loss"], s.get("grad_norm")) for s in json.load(open(path))["runs"][0]["steps"]]
got, want = steps(sys.argv[1]), steps(sys.argv[2])
name = f"sync1_{sys.argv[3]}"
if len(got) != len(want):
    print("FAIL", name, f"{len(got)} steps, want {len(want)}"); sys.exit()
diff = [i for i in range(len(got)) if got[i] != want[i]]
if diff:
    i = diff[0]
    print("FAIL", name, f"{len(diff)} of {len(got)} steps differ from single's; first step {i + 1}:",
          f"loss {got[i][0]!r} vs {want[i][0]!r}, grad_norm {got[i][1]!r} vs {want[i][1]!r}")
else:
    print("PASS", name, f"{len(got)} losses and gradient norms equal single's bit for bit")
PY
)
done

estimate zero1_resume 10 80
code=0
for leg in "half --steps=10" "rest --steps=20 --resume=latest"; do
  read -r name flags <<< "$leg"
  # shellcheck disable=SC2086
  timeout 40 "$bin" "${fixed[@]}" --strategy=zero1 $flags --checkpoint_dir="$out/ckpt_zero1" \
    --out="$out/zero1_resume_$name.json" > "$out/zero1_resume_$name.log" 2>&1 \
    || { code=$?; record FAIL zero1_resume "the $name run exited $code (zero1_resume_$name.log)"; break; }
done
if [[ $code == 0 ]]; then
  record $(python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def losses(path):
    return {s["step"]: s["loss"] for s in json.load(open(path))["runs"][0]["steps"]}
try:
    cont = losses(f"{out}/resume_cont.json")
except OSError:
    print("FAIL zero1_resume no resume_cont.json (the resume check did not run)"); sys.exit()
rest = losses(f"{out}/zero1_resume_rest.json")
strategy = json.load(open(f"{out}/ckpt_zero1/step_00000010/manifest.json")).get("strategy")
tail = {s: cont[s] for s in range(11, 21)}
diff = [s for s in tail if rest.get(s) != tail[s]]
if sorted(rest) != sorted(tail) or diff or strategy != "zero1":
    worst = max((abs(rest.get(s, float("inf")) - tail[s]) for s in tail), default=0)
    print("FAIL zero1_resume", f"{len(diff)} of 10 resumed losses differ from single's (max {worst:.3g}),",
          f"manifest strategy {strategy!r}")
else:
    print("PASS zero1_resume", "steps 11..20 resumed from the zero1 checkpoint equal single's bit for bit")
PY
)
fi

# comm_bench's NCCL sweep and doctor's GPU checks: built here (prepare.sh),
# neither has run on a GPU before.
nccl_bench="${COMM_BENCH_NCCL:-$here/bin/comm_bench_nccl}"
smoke="${GPU_SMOKE:-$here/../../comm_bench/gpu_smoke.sh}"
estimate gpu_smoke 30 240
if [[ ! -x "$nccl_bench" ]]; then
  record FAIL gpu_smoke "no comm_bench_nccl at $nccl_bench (see the header)"
else
  code=0
  OUT="$out/gpu_smoke" timeout 240 bash "$smoke" "$nccl_bench" > "$out/gpu_smoke.log" 2>&1 \
    || code=$?
  if [[ $code == 0 ]]; then
    record PASS gpu_smoke "every collective at world size 1, float32 and bfloat16, 1K..64M, checked; a bad flag exits 2 (gpu_smoke/)"
  else
    record FAIL gpu_smoke "exit $code (gpu_smoke/exit_codes.txt, gpu_smoke.log)"
  fi
fi
doctor="${DOCTOR_GPU:-$here/bin/doctor_gpu}"
estimate doctor_gpu 5 60
if [[ ! -x "$doctor" ]]; then
  record FAIL doctor_gpu "no doctor_gpu at $doctor (see the header)"
else
  code=0
  timeout 60 "$doctor" --out="$out/doctor_gpu.json" > "$out/doctor_gpu.txt" 2>&1 || code=$?
  if [[ $code == 0 ]]; then
    record PASS doctor_gpu "every GPU check passed (doctor_gpu.txt, doctor_gpu.json)"
  else
    record FAIL doctor_gpu "exit $code (doctor_gpu.txt)"
  fi
fi

estimate gpt2 40 150
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

# Performance: ours and PyTorch's in alternating rounds.
peer="${TORCH_PEER:-$here/../../trainer/bench/gpt2_torch_peer.py}"
rounds="${PERF_ROUNDS:-3}"
perf_shape=(--vocab_size=50304 --d_model=768 --n_layers=12 --n_heads=12 --seq_len=1024
            --batch_size=16)
estimate perf 180 420
# A run that times out is not repeated in later rounds (the worst case stays
# one timeout per kind): ours 90 s, eager 90 s, compile 240 s in round 1 (its
# compilation) and 120 s after.
declare -A gave_up=()
for ((r = 1; r <= rounds; ++r)); do
  if [[ -z "${gave_up[ours]:-}" ]]; then
    code=0
    timeout 90 "$bin" --strategy=single --nproc=1 --data=synthetic "${perf_shape[@]}" \
      --precision=bf16 --steps=13 --timing_warmup_steps=3 --nomarkdown \
      --out="$out/perf_ours_$r.json" > "$out/perf_ours_$r.log" 2>&1 || code=$?
    [[ $code == 0 ]] || echo "exit $code" >> "$out/perf_ours_$r.log"
    [[ $code == 124 ]] && gave_up[ours]=1
  fi
  for mode in eager compile; do
    [[ -n "${gave_up[$mode]:-}" ]] && continue
    limit=90
    [[ $mode == compile ]] && limit=$(( r == 1 ? 240 : 120 ))
    code=0
    timeout $limit "$python" "$peer" --mode=$mode "${perf_shape[@]}" --steps=13 --warmup=3 \
      --out="$out/perf_${mode}_$r.json" > "$out/perf_${mode}_$r.log" 2>&1 || code=$?
    [[ $code == 0 ]] || echo "exit $code" >> "$out/perf_${mode}_$r.log"
    [[ $code == 124 ]] && gave_up[$mode]=1
  done
done
while read -r line; do
  # shellcheck disable=SC2086
  [[ -n "$line" ]] && record $line
done < <(python3 "$here/perf_summary.py" "$out" "$rounds")

# Where our step's time goes, per kernel, when asked (PROFILE=1) and Nsight
# Systems is there: one short run of ours (not part of the 5 minutes).
if [[ -n "${PROFILE:-}" ]] && command -v nsys > /dev/null; then
  estimate profile 40 120
  timeout 120 nsys profile --stats=true --force-overwrite=true -o "$out/perf_profile" \
    "$bin" --strategy=single --nproc=1 --data=synthetic "${perf_shape[@]}" --precision=bf16 \
    --steps=5 --timing_warmup_steps=2 --peak_flops=1e15 --nomarkdown \
    --out="$out/perf_profile.json" > "$out/perf_profile.txt" 2>&1 \
    || echo "exit $?" >> "$out/perf_profile.txt"
fi

python3 "$here/write_results.py" "$out" || record FAIL results "write_results.py failed"
echo "$failed check(s) failed; results in $out"
[[ $failed == 0 ]]
