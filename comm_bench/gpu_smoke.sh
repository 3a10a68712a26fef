#!/usr/bin/env bash
# GPU smoke test of comm_bench_nccl at world size 1 (docs/gpu.md): every
# collective, float32 and bfloat16, 1K..64M, check on. Writes the tables, the
# JSON/Markdown/SVG results, nvidia-smi and ldd output to $OUT (default
# ./gpu_smoke_out) and exits non-zero if any run failed.
#
#   comm_bench/gpu_smoke.sh [path/to/comm_bench_nccl]
#
# Build the binary where Bazel runs (it needs no GPU to build) and copy it
# along: it links Abseil, glog, protobuf and libstdc++ statically and takes
# NCCL and the CUDA runtime from the GPU machine.
#   bazel build --config=cuda //comm_bench:comm_bench_nccl
#   cp -L bazel-bin/comm_bench/comm_bench_nccl comm_bench/gpu/   # gitignored
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="${1:-$here/gpu/comm_bench_nccl}"
out="${OUT:-$PWD/gpu_smoke_out}"
mkdir -p "$out"

{
  echo "## nvidia-smi"; nvidia-smi 2>&1 || echo "nvidia-smi failed"
  echo "## ldd $binary"; ldd "$binary" 2>&1
} > "$out/environment.txt"

status=0
for dtype in float32 bfloat16; do
  "$binary" --nproc=1 --dtype="$dtype" \
    --ops=all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,all_to_allv \
    --minbytes=1K --maxbytes=64M --stepfactor=2 --iters=20 --warmup_iters=5 \
    --check=1 --out="$out/nccl_$dtype.json" --markdown="$out/nccl_$dtype.md" \
    --plot="$out/nccl_$dtype.svg" > "$out/nccl_$dtype.txt" 2>&1
  code=$?
  echo "comm_bench_nccl --dtype=$dtype: exit $code" | tee -a "$out/exit_codes.txt"
  [[ $code -eq 0 ]] || status=1
done
# A bad flag must be refused before anything runs (exit 2).
"$binary" --nproc=1 --stepfactor=1 > "$out/bad_flag.txt" 2>&1
code=$?
echo "comm_bench_nccl --stepfactor=1: exit $code (expected 2)" | tee -a "$out/exit_codes.txt"
[[ $code -eq 2 ]] || status=1
exit $status
