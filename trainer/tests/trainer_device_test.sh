#!/usr/bin/env bash
# --device=cuda: the trainer hands its command line to trainer_cuda unchanged
# (a stand-in records it), refuses flags the CUDA path does not implement
# before the hand-off, and says how to get a CUDA build when it has none.
# Under --config=cuda the real trainer_cuda is beside it: on a machine
# without a GPU it refuses with one line, exit 2.
set -euo pipefail
source trainer/tests/cli_test_lib.sh

cuda_tiny=(--vocab_size=64 --d_model=32 --n_layers=1 --n_heads=4 --seq_len=16
           --batch_size=4 --steps=3 --timing_warmup_steps=1 --data=synthetic
           --strategy=single --nproc=1)
real_cuda="$(pwd)/trainer/cuda/trainer_cuda"

# A stand-in trainer_cuda that records its arguments, one per line.
stub="$TEST_TMPDIR/stub_trainer_cuda"
cat > "$stub" <<STUB
#!/usr/bin/env bash
printf '%s\n' "\$@" > "$out/handed_args"
exit 0
STUB
chmod +x "$stub"

# The hand-off: exactly the same arguments, and the stand-in's exit code.
MTB_TRAINER_CUDA="$stub" "$trainer" --device=cuda "${cuda_tiny[@]}" --nomarkdown \
  > "$out/stdout" 2> "$out/stderr" || { cat "$out/stderr" >&2; fail "hand-off exited $?"; }
printf '%s\n' --device=cuda "${cuda_tiny[@]}" --nomarkdown > "$out/want_args"
cmp -s "$out/want_args" "$out/handed_args" \
  || { diff "$out/want_args" "$out/handed_args" >&2; fail "trainer_cuda got other arguments"; }

# Flags the CUDA path does not implement: refused before the hand-off.
rm -f "$out/handed_args"
export MTB_TRAINER_CUDA="$stub"
expect 2 "--fault is not supported with --device=cuda" \
  --device=cuda "${cuda_tiny[@]}" --fault=nan:rank=0,step=2
expect 2 "--intra_op_threads is not supported with --device=cuda" \
  --device=cuda "${cuda_tiny[@]}" --intra_op_threads=1
expect 2 "--async_checkpoint is not supported with --device=cuda" \
  --device=cuda "${cuda_tiny[@]}" --checkpoint_dir "$out/ckpt" --save_every=1 --async_checkpoint
[[ ! -e "$out/handed_args" ]] || fail "a refused run was handed off"
expect 2 "--device=tpu is not one of cpu, cuda" "${cuda_tiny[@]}" --device=tpu
export MTB_TRAINER_CUDA="$out/no_such_binary"
expect 2 "MTB_TRAINER_CUDA=$out/no_such_binary is not an executable file" \
  --device=cuda "${cuda_tiny[@]}"
unset MTB_TRAINER_CUDA

if [[ -x "$real_cuda" ]]; then
  # A --config=cuda build: the real trainer_cuda, found beside the trainer.
  if nvidia-smi > /dev/null 2>&1; then
    echo "a GPU is visible: the refusal without one is not checked here"
  else
    expect 2 "trainer_cuda: --device=cuda: no usable GPU: " --device=cuda "${cuda_tiny[@]}"
    [[ "$(wc -l < "$out/stderr")" == 1 ]] || { cat "$out/stderr" >&2; fail "more than one line"; }
  fi
  # Run directly: values and flags it does not implement.
  trainer="$real_cuda"
  expect 2 "--dropout=0.1 is not supported with --device=cuda yet" \
    "${cuda_tiny[@]}" --dropout=0.1
  expect 2 "--strategy=zero2 on 1 GPU (--strategy=single, ddp or zero1) is not supported" \
    "${cuda_tiny[@]}" --strategy=zero2
  expect 2 "--strategy=fsdp on 2 GPUs (--strategy=single, ddp or zero1) is not supported" \
    "${cuda_tiny[@]}" --nproc=2 --strategy=fsdp
  if ! nvidia-smi > /dev/null 2>&1; then
    # bf16 is accepted: without a GPU it goes as far as the device probe.
    expect 2 "trainer_cuda: --device=cuda: no usable GPU: " "${cuda_tiny[@]}" --precision=bf16
    # zero1 with checkpoints on several GPUs is accepted: it stops at the GPU.
    expect 2 "trainer_cuda: --device=cuda: no usable GPU: " \
      "${cuda_tiny[@]}" --nproc=2 --strategy=zero1 --checkpoint_dir="$out/ckpt" --save_every=1
  fi
  expect 2 "fault" "${cuda_tiny[@]}" --fault=nan:rank=0,step=2
  # Started by a launcher as one rank of several: not written yet.
  LOCAL_RANK=1 expect 2 "LOCAL_RANK=1: trainer_cuda does not run as one process per GPU yet" \
    "${cuda_tiny[@]}" --strategy=ddp
elif beside="$(dirname "$(readlink -f "$trainer")")" &&
     [[ -x "$beside/cuda/trainer_cuda" || -x "$beside/trainer_cuda" ]]; then
  # This build has no CUDA, but an earlier --config=cuda build in the same
  # output tree left a trainer_cuda beside the trainer (--define does not
  # change the output folder): the trainer finds it and hands off to it.
  if ! nvidia-smi > /dev/null 2>&1; then
    expect 2 "trainer_cuda: --device=cuda: no usable GPU: " --device=cuda "${cuda_tiny[@]}"
  fi
else
  # No CUDA in this build: the trainer says how to get it.
  expect 2 "this trainer was built without CUDA (no trainer_cuda beside it); build one with \`./bazelw build --config=cuda //trainer //trainer/cuda:trainer_cuda\`" \
    --device=cuda "${cuda_tiny[@]}"
fi
echo "PASS"
