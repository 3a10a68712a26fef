#!/usr/bin/env bash
# Prepares tools/gpu/check.sh's inputs here (Bazel, LibTorch, CUDA toolkit; no
# GPU needed): builds trainer_cuda and kernel_check with --config=cuda, copies
# them to tools/gpu/bin (with COMMIT, the commit they come from), and writes
# the per-kernel reference folder to tools/gpu/refs. Then, on the GPU machine, from a copy of this checkout:
#   tools/gpu/check.sh OUT_DIR
# Run from the repository root. Exit 0 when everything is in place.
set -euo pipefail
cd "$(dirname "$0")/../.."
nice -n 10 ./bazelw build --config=cuda //trainer/cuda:trainer_cuda //trainer/cuda:kernel_check
mkdir -p tools/gpu/bin
cp -fL bazel-bin/trainer/cuda/trainer_cuda bazel-bin/trainer/cuda/kernel_check tools/gpu/bin/
chmod u+w tools/gpu/bin/*
# The commit the binaries were built from (+dirty when the tree had changes),
# for the results file.
echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!tools/gpu/bin' ':!tools/gpu/refs' || echo +dirty)" \
  > tools/gpu/bin/COMMIT
nice -n 10 ./bazelw build //trainer/cuda:kernel_refs_dump
rm -rf tools/gpu/refs
bazel-bin/trainer/cuda/kernel_refs_dump tools/gpu/refs
ls -l tools/gpu/bin
du -sh tools/gpu/refs
