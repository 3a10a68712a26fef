#!/usr/bin/env bash
# Prepares tools/gpu/check.sh's inputs here (Bazel, LibTorch, CUDA toolkit; no
# GPU needed): builds trainer_cuda, kernel_check, comm_bench_nccl and
# doctor_gpu with --config=cuda, copies
# them to tools/gpu/bin (with COMMIT, the commit they come from), and writes
# the per-kernel reference folder to tools/gpu/refs and check.sh's torch_ref
# reference folder to tools/gpu/torch_ref (torch_ref.sh: the CPU trainer's
# initial weights exported to safetensors, step 1's batch, the CPU trainer's
# loss, float64 gradients by /usr/bin/python3). Then, on the GPU machine, from a copy of this checkout:
#   tools/gpu/check.sh OUT_DIR
# Run from the repository root. Exit 0 when everything is in place.
set -euo pipefail
cd "$(dirname "$0")/../.."
nice -n 10 ./bazelw build --config=cuda //trainer/cuda:trainer_cuda //trainer/cuda:kernel_check \
  //comm_bench:comm_bench_nccl //doctor:doctor_gpu
mkdir -p tools/gpu/bin
cp -fL bazel-bin/trainer/cuda/trainer_cuda bazel-bin/trainer/cuda/kernel_check \
  bazel-bin/comm_bench/comm_bench_nccl bazel-bin/doctor/doctor_gpu tools/gpu/bin/
chmod u+w tools/gpu/bin/*
# The commit the binaries were built from (+dirty when the tree had changes),
# for the results file.
echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!tools/gpu/bin' ':!tools/gpu/refs' ':!tools/gpu/torch_ref' || echo +dirty)" \
  > tools/gpu/bin/COMMIT
nice -n 10 ./bazelw build //trainer/cuda:kernel_refs_dump //trainer/cuda:batch_dump //trainer \
  //ckpt_tool
rm -rf tools/gpu/refs
bazel-bin/trainer/cuda/kernel_refs_dump tools/gpu/refs
tools/gpu/torch_ref.sh bazel-bin/trainer/trainer bazel-bin/ckpt_tool/ckpt_tool \
  bazel-bin/trainer/cuda/batch_dump tools/gpu/torch_ref
ls -l tools/gpu/bin
du -sh tools/gpu/refs tools/gpu/torch_ref
