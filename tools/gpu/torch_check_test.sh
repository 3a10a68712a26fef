#!/usr/bin/env bash
# torch_check.py on the CPU (/usr/bin/python3, PyTorch 1.13) against the
# reference torch_ref.sh makes with the CPU trainer, ckpt_tool and batch_dump:
#   - the CPU trainer's step-1 loss is check.sh's small run's first CPU loss
#     (cpu_losses_small.txt) bit for bit: the same model, seed and batch;
#   - good: torch's fp32 loss and gradients, a stand-in transformers'
#     GPT2LMHeadModel (testdata/transformers: safetensors_check's forward, so
#     the hf_gpt2 code path runs here) and a trainer_cuda result carrying the
#     CPU loss all pass, exit 0;
#   - bad: a transposed attn.c_proj (--plant) fails torch_grads and the
#     stand-in loading it transposed fails hf_gpt2_grads, exit 1 (the loss at
#     the initial weights moves only 6.3e-4, inside the loss bound: the
#     gradients are what catch it);
#   - without transformers: hf_gpt2 is a SKIP; a trainer_cuda loss off by
#     1e-3 fails torch_cuda, exit 1; a missing REF_DIR file exits 2.
set -u
here=tools/gpu
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
python=/usr/bin/python3
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() {  # expect FILE REGEX
  grep -Eq "$2" "$1" || fail "$(basename "$1"): no line matching '$2': $(cat "$1")"
}

ref="$tmp/ref"
"$here/torch_ref.sh" trainer/trainer ckpt_tool/ckpt_tool trainer/cuda/batch_dump "$ref" \
  > "$tmp/ref.log" 2>&1 || { echo "torch_ref.sh failed: $(cat "$tmp/ref.log")"; exit 1; }
cpu_loss=$("$python" -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))["runs"][0]["steps"][0]["loss"]))' "$ref/cpu_run.json")
small_loss=$(awk '!/^#/ && $1 == 1 { print $2 }' "$here/cpu_losses_small.txt")
[[ "$cpu_loss" == "$small_loss" ]] || fail "the CPU trainer's step-1 loss $cpu_loss is not the small run's $small_loss"

"$python" - "$ref/cpu_run.json" "$tmp/cuda_good.json" "$tmp/cuda_bad.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
json.dump(run, open(sys.argv[2], "w"))
run["runs"][0]["steps"][0]["loss"] += 1e-3
json.dump(run, open(sys.argv[3], "w"))
PY

code=0
PYTHONPATH="$here/testdata" "$python" "$here/torch_check.py" check "$ref" \
  --cuda_result="$tmp/cuda_good.json" > "$tmp/good.txt" 2>&1 || code=$?
[[ $code == 0 ]] || fail "good: exit $code, want 0: $(cat "$tmp/good.txt")"
expect "$tmp/good.txt" "^PASS torch_loss max\|torch fp32 - cpu trainer\|=[0-9.e+-]+ \(cpu, .* bound [0-9.e-]+$"
expect "$tmp/good.txt" "^PASS torch_grads max\|torch fp32 grad - fp64\|=[0-9.e+-]+ over 28 tensors .* bound "
expect "$tmp/good.txt" "^PASS hf_gpt2 max\|GPT2LMHeadModel - cpu trainer\|=.*transformers stand-in.* bound "
expect "$tmp/good.txt" "^PASS hf_gpt2_grads max\|GPT2LMHeadModel grad - fp64\|=.* over 28 tensors .* bound "
expect "$tmp/good.txt" "^PASS torch_cuda max\|trainer_cuda step 1 - torch fp32\|=0 .* bound 0.0001$"
[[ $(wc -l < "$tmp/good.txt") == 5 ]] || fail "good: want 5 lines: $(cat "$tmp/good.txt")"

code=0
PYTHONPATH="$here/testdata" STUB_HF_TRANSPOSE=1 "$python" "$here/torch_check.py" check "$ref" \
  --plant=transpose_c_proj > "$tmp/bad.txt" 2>&1 || code=$?
[[ $code == 1 ]] || fail "bad: exit $code, want 1: $(cat "$tmp/bad.txt")"
expect "$tmp/bad.txt" "^FAIL torch_grads max\|torch fp32 grad - fp64\|=0\.0[0-9]+ "
expect "$tmp/bad.txt" "^FAIL hf_gpt2_grads max\|GPT2LMHeadModel grad - fp64\|=0\.0[0-9]+ "

code=0
"$python" "$here/torch_check.py" check "$ref" --cuda_result="$tmp/cuda_bad.json" \
  > "$tmp/no_hf.txt" 2>&1 || code=$?
[[ $code == 1 ]] || fail "no transformers, trainer_cuda off: exit $code, want 1: $(cat "$tmp/no_hf.txt")"
expect "$tmp/no_hf.txt" "^SKIP hf_gpt2 transformers does not import \(ModuleNotFoundError\)$"
expect "$tmp/no_hf.txt" "^FAIL torch_cuda max\|trainer_cuda step 1 - torch fp32\|=0.001 .* bound 0.0001$"
expect "$tmp/no_hf.txt" "^PASS torch_grads "
[[ $(wc -l < "$tmp/no_hf.txt") == 4 ]] || fail "no transformers: want 4 lines: $(cat "$tmp/no_hf.txt")"

code=0
"$python" "$here/torch_check.py" check "$tmp/absent" > /dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "absent REF_DIR: exit $code, want 2"

if [[ $failures != 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
