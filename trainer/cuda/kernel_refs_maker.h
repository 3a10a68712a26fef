// The reference side of the per-kernel checks (kernel_refs.h): inputs drawn
// from a seed, outputs computed in fp64 by LibTorch's ops (the CPU trainer's:
// at::layer_norm's kernels, at::gelu, softmax, cross-entropy, the trainer's
// AdamW), and the fp32 and bf16 bounds derived per output (docs/gpu.md,
// "Per-kernel checks", gives each derivation).
#ifndef MTB_TRAINER_CUDA_KERNEL_REFS_MAKER_H_
#define MTB_TRAINER_CUDA_KERNEL_REFS_MAKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/cuda/kernel_refs.h"

namespace mtb {
namespace cuda {

// The fixed small shape: rows past a warp (T = 40, D = 96), a vocabulary past
// a 256-thread block (V = 300), hs = 24.
struct RefShape {
  int64_t batch = 2;
  int64_t seq_len = 40;
  int64_t d_model = 96;
  int64_t n_heads = 4;
  int64_t vocab = 300;
};

// The kernels, in the order MakeKernelRefs emits them.
std::vector<std::string> KernelRefNames();

KernelRefs MakeKernelRefs(const RefShape& shape, uint64_t seed);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_KERNEL_REFS_MAKER_H_
