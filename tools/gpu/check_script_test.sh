#!/usr/bin/env bash
# tools/gpu/check.sh's own logic, on the CPU, with stand-ins for the two GPU
# binaries (its first real run costs scarce GPU time, so a script bug must not
# be found there): every check passes with good stand-ins (the 2-rank one
# skipped on one GPU); a loss off by 1e-3, a planted off-by-one that passes, a
# failing kernel, a resumed loss off by 1e-9, a corrupt checkpoint, a 2-rank
# run off by 1e-3 (ddp and zero1), zero1 at world size 1 off single by
# 1e-12 and a zero1 resume off single's continuous run by 1e-12 each fail
# their check (and the exit code), as does a missing reference folder; bad
# usage exits 2.
set -u
script=tools/gpu/check.sh
losses=tools/gpu/cpu_losses_small.txt
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
stubs="$tmp/stubs"
mkdir -p "$stubs" "$tmp/refs"
: > "$tmp/refs/manifest.txt"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$stubs/trainer_cuda" <<'EOF'
#!/usr/bin/env bash
# Stand-in trainer_cuda (bash and awk: a Python start costs seconds under
# load): refuses --fault (exit 2); the small run returns the CPU losses
# (+ $STUB_SHIFT; two ranks + $STUB_NCCL_SHIFT; zero1 on one GPU
# + $STUB_ZERO1_SHIFT, resumed + $STUB_ZERO1_RESUME_SHIFT), the large one a
# falling loss.
# With --checkpoint_dir it trains from 10 on --resume=latest (its losses
# + $STUB_RESUME_SHIFT) and saves at every 10th step a checkpoint of the
# CUDA trainer's layout whose shard holds the step's state (corrupted after
# its manifest with $STUB_CORRUPT_CKPT).
out=""
small=0
steps=20
nproc=1
strategy=single
ckpt=""
start=0
for a in "$@"; do
  case "$a" in
    --fault*) echo "trainer_cuda: --fault is not supported with --device=cuda" >&2; exit 2 ;;
    --out=*) out="${a#--out=}" ;;
    --vocab_size=256) small=1 ;;
    --steps=*) steps="${a#--steps=}" ;;
    --nproc=*) nproc="${a#--nproc=}" ;;
    --strategy=*) strategy="${a#--strategy=}" ;;
    --checkpoint_dir=*) ckpt="${a#--checkpoint_dir=}" ;;
    --resume=latest) start=10 ;;
  esac
done
shift_by="${STUB_SHIFT:-0}"
[[ $nproc == 2 ]] && shift_by="${STUB_NCCL_SHIFT:-0}"
[[ $nproc == 1 && $strategy == zero1 ]] && shift_by="${STUB_ZERO1_SHIFT:-0}"
[[ $nproc == 2 && $strategy == zero1 ]] && shift_by="${STUB_NCCL_ZERO1_SHIFT:-0}"
[[ $start != 0 ]] && shift_by="${STUB_RESUME_SHIFT:-0}"
[[ $start != 0 && $strategy == zero1 ]] && shift_by="${STUB_ZERO1_RESUME_SHIFT:-0}"
if [[ $small == 1 ]]; then
  awk -v shift="$shift_by" -v first="$start" -v last="$steps" \
    '!/^#/ && NF == 2 && $1 > first && $1 <= last { printf "%s%s:%.17g", (n++ ? "," : ""), $1, $2 + shift }' \
    "$CPU_LOSSES" > "$out.losses"
else
  awk 'BEGIN { for (i = 0; i < 12; ++i) printf "%s%d:%.17g", (i ? "," : ""), i + 1, 11 - 0.1 * i }' > "$out.losses"
fi
awk '{ n = split($0, l, ","); printf "{\"runs\": [{\"tokens_per_second\": 1234.0, \"steps\": ["
       for (i = 1; i <= n; ++i) { split(l[i], p, ":"); printf "%s{\"step\": %s, \"loss\": %s, \"grad_norm\": %s}", (i > 1 ? ", " : ""), p[1], p[2], p[1] }
       print "]}]}" }' "$out.losses" > "$out"
if [[ -n "$ckpt" ]]; then
  for ((s = start + 1; s <= steps; ++s)); do
    (( s % 10 == 0 )) || continue
    d=$(printf '%s/step_%08d' "$ckpt" "$s")
    mkdir -p "$d"
    resumed=""
    [[ $start != 0 ]] && resumed="${STUB_RESUME_SHIFT:-}"
    echo "state after step $s $resumed" > "$d/rank_00000.bin"
    sha=$(sha256sum "$d/rank_00000.bin" | cut -d' ' -f1)
    size=$(stat -c %s "$d/rank_00000.bin")
    tensors=""
    for t in model/wte optimizer/exp_avg/wte optimizer/exp_avg_sq/wte optimizer/step; do
      tensors="$tensors${tensors:+, }{\"name\": \"$t\"}"
    done
    printf '{"strategy": "%s", "files": [{"name": "rank_00000.bin", "size": "%s", "sha256": "%s"}], "tensors": [%s]}\n' \
      "$strategy" "$size" "$sha" "$tensors" > "$d/manifest.json"
    : > "$d/READY"
    [[ -n "${STUB_CORRUPT_CKPT:-}" ]] && echo x >> "$d/rank_00000.bin"
  done
fi
exit 0
EOF

cat > "$stubs/kernel_check" <<'EOF'
#!/usr/bin/env bash
# Stand-in kernel_check: PASS lines; --plant_off_by_one fails the softmax
# (unless $STUB_PLANT_PASSES); $STUB_KERNEL_FAIL fails the classifier.
planted=0
for a in "$@"; do [[ "$a" == --plant_off_by_one ]] && planted=1; done
echo "# stand-in GPU"
if [[ $planted == 1 && -z "${STUB_PLANT_PASSES:-}" ]]; then
  echo "FAIL causal_softmax_forward/att max_err=0.996 bound=3.89e-06 ratio=2.56e+05 at=6401"
  exit 1
fi
echo "PASS causal_softmax_forward/att max_err=1e-07 bound=3.89e-06 ratio=0.03 at=1"
if [[ -n "${STUB_KERNEL_FAIL:-}" ]]; then
  echo "FAIL classifier/losses max_err=1 bound=0.000262 ratio=3.8e+03 at=4"
  exit 1
fi
echo "PASS classifier/losses max_err=1e-07 bound=0.000262 ratio=0.0004 at=4"
EOF
# Stand-in nvidia-smi: $STUB_GPUS GPUs (default 1).
cat > "$stubs/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
for ((g = 0; g < ${STUB_GPUS:-1}; ++g)); do echo "GPU $g: stand-in (UUID: GPU-$g)"; done
EOF
chmod +x "$stubs/trainer_cuda" "$stubs/kernel_check" "$stubs/nvidia-smi"

# run NAME [ENV=VALUE...]: check.sh into $tmp/NAME; sets $code.
run() {
  local name="$1"
  shift
  code=0
  env TRAINER_CUDA="$stubs/trainer_cuda" KERNEL_CHECK="$stubs/kernel_check" \
    KERNEL_REFS="$tmp/refs" CPU_LOSSES="$losses" PATH="$stubs:$PATH" "$@" \
    bash "$script" "$tmp/$name" > "$tmp/$name.log" 2>&1 || code=$?
}
expect_line() {  # expect_line NAME REGEX
  grep -Eq "$2" "$tmp/$1/checks.txt" || fail "$1: no line matching '$2' in checks.txt: $(cat "$tmp/$1/checks.txt")"
}

run good
[[ $code == 0 ]] || fail "good: exit $code, want 0: $(cat "$tmp/good.log")"
for check in kernels planted refusal small resume ckpt sync1_ddp sync1_zero1 zero1_resume gpt2; do
  expect_line good "^PASS $check "
done
expect_line good "^SKIP nccl2 1 GPU\(s\) here, two needed \(NCCL does not run two ranks on one GPU\)"
expect_line good "^SKIP nccl2_zero1 1 GPU\(s\) here, two needed"
[[ $(wc -l < "$tmp/good/checks.txt") == 12 ]] || fail "good: want 12 checks: $(cat "$tmp/good/checks.txt")"
expect_line good "^PASS sync1_zero1 20 losses and gradient norms equal single's bit for bit"
expect_line good "^PASS zero1_resume steps 11..20 resumed from the zero1 checkpoint equal single's bit for bit"
for check in kernels refusal small resume ckpt "sync1 ddp" "sync1 zero1" zero1_resume gpt2; do
  grep -Eq "^check $check: estimate ~[0-9]+ s of GPU time \(at most [0-9]+ s\)" "$tmp/good.log" \
    || fail "good: no time estimate for $check"
done
expect_line good "^PASS resume steps 11..20 resumed equal the continuous run bit for bit"
expect_line good "^PASS ckpt 1 files as the manifest says, 4 tensors"
expect_line good "^PASS small max\|gpu-cpu\|=0 "
[[ -s "$tmp/good/kernels.txt" && -s "$tmp/good/kernels_planted.txt" ]] || fail "good: kernel outputs not kept"

# Three faults at once, each failing its own check.
run bad STUB_SHIFT=1e-3 STUB_PLANT_PASSES=1 STUB_KERNEL_FAIL=1
[[ $code == 1 ]] || fail "bad: exit $code, want 1"
expect_line bad "^FAIL small max\|gpu-cpu\|=0.001 "
expect_line bad "^FAIL planted exit 1, want 1 with causal_softmax_forward/att failing"
expect_line bad "^FAIL kernels exit 1, 1 outputs failed, 1 passed"
expect_line bad "^PASS refusal "
expect_line bad "^PASS sync1_ddp "
expect_line bad "^PASS gpt2 "

# Two GPUs: the 2-rank run is checked.
run two_gpus STUB_GPUS=2
[[ $code == 0 ]] || fail "two_gpus: exit $code, want 0: $(cat "$tmp/two_gpus/checks.txt")"
expect_line two_gpus "^PASS nccl2 max\|2 ranks - 1 rank\|=0 bound 0.0001"
expect_line two_gpus "^PASS nccl2_zero1 max\|2 ranks - 1 rank\|=0 bound 0.0001"

# Three more faults at once: a resumed loss off by 1e-9 (and its shard
# file), a shard file that is not what its manifest says, a 2-rank run off
# by 1e-3.
run bad2 STUB_RESUME_SHIFT=1e-9 STUB_CORRUPT_CKPT=1 STUB_GPUS=2 STUB_NCCL_SHIFT=1e-3
[[ $code == 1 ]] || fail "bad2: exit $code, want 1"
expect_line bad2 "^FAIL resume 10 of 10 resumed losses differ \(max 1e-09\), step-20 shard files differ"
expect_line bad2 "^FAIL ckpt rank_00000.bin is not what the manifest says"
expect_line bad2 "^FAIL nccl2 max\|2 ranks - 1 rank\|=0.001 "
expect_line bad2 "^PASS nccl2_zero1 "
expect_line bad2 "^PASS small "

# Three zero1 faults at once, each failing its own check and nothing else:
# zero1 at world size 1 1e-12 off single, a zero1 resume 1e-12 off single's
# continuous run, zero1 at two ranks 1e-3 off one rank.
run zero1_bad STUB_ZERO1_SHIFT=1e-12 STUB_ZERO1_RESUME_SHIFT=1e-12 STUB_GPUS=2 \
  STUB_NCCL_ZERO1_SHIFT=1e-3
[[ $code == 1 ]] || fail "zero1_bad: exit $code, want 1"
expect_line zero1_bad "^FAIL sync1_zero1 20 of 20 steps differ from single's; first step 1:"
expect_line zero1_bad "^FAIL zero1_resume 10 of 10 resumed losses differ from single's \(max 1e-12\), manifest strategy 'zero1'"
expect_line zero1_bad "^FAIL nccl2_zero1 max\|2 ranks - 1 rank\|=0.001 "
expect_line zero1_bad "^PASS sync1_ddp "
expect_line zero1_bad "^PASS nccl2 "
[[ $(grep -c '^FAIL' "$tmp/zero1_bad/checks.txt") == 3 ]] || fail "zero1_bad: $(cat "$tmp/zero1_bad/checks.txt")"

run no_refs KERNEL_REFS="$tmp/absent"
[[ $code == 1 ]] || fail "no_refs: exit $code, want 1"
expect_line no_refs "^FAIL kernels no kernel_check at .* or no references at "

code=0
bash "$script" > /dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "no OUT_DIR: exit $code, want 2"

if [[ $failures != 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
