// The model's matrix products, on the process's GEMM backend
// (common/gemm/backend.h): the linear layers (x·Wᵀ + b, and the tied LM
// head), and attention's batched Q·Kᵀ and A·V. Autograd-aware: with oneDNN,
// custom autograd functions run forward and backward (dX, dW, db; dA, dB)
// through dnnl_sgemm; with BLAS, LibTorch's own ops and their own backward.
//
// Only fp32 takes the oneDNN functions. Under bf16 autocast (common/nn/
// autocast.h) both backends call LibTorch's ops, whose bf16 kernels are
// oneDNN's brgemm already (docs/gemm.md).
#ifndef MTB_COMMON_GEMM_OPS_H_
#define MTB_COMMON_GEMM_OPS_H_

#include "ATen/core/Tensor.h"
#include "common/gemm/backend.h"

namespace mtb {
namespace gemm {

// torch.nn.functional.linear: x (..., K), weight (N, K), bias (N) or
// undefined -> (..., N).
at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// torch.matmul for equal batch dimensions: a (..., M, K), b (..., K, N) ->
// (..., M, N). Strided views (transposes, head slices) are read in place.
at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b);

// The same on an explicit backend (tests, benchmarks).
at::Tensor Linear(Backend backend, const at::Tensor& x, const at::Tensor& weight,
                  const at::Tensor& bias);
at::Tensor Matmul(Backend backend, const at::Tensor& a, const at::Tensor& b);

}  // namespace gemm
}  // namespace mtb

#endif  // MTB_COMMON_GEMM_OPS_H_
