// fp32 matrix products through oneDNN's dnnl_sgemm, on LibTorch tensors
// without copying strided views (the attention heads' Q, K and V are views
// into the fused QKV output: a row stride of 3W is just a leading dimension).
#ifndef MTB_COMMON_GEMM_ONEDNN_H_
#define MTB_COMMON_GEMM_ONEDNN_H_

#include "ATen/core/Tensor.h"

namespace mtb {
namespace gemm {

// out (..., M, N) = a (..., M, K) · b (..., K, N) + beta · out.
// a and b are fp32 with the same batch dimensions (no broadcasting); each
// matrix needs a unit stride in one of its last two dimensions (a transposed
// view is passed as a transposed operand) or it is copied first. out is a
// contiguous fp32 (..., M, N); with beta 0 its contents are ignored.
//
// Threads: one product runs on oneDNN's OpenMP threads, which are the calling
// thread's intra-op threads (at::set_num_threads sets both), on every thread:
// a thread that has not run a LibTorch parallel kernel yet (a fresh rank
// thread) is first given the intra-op count, as LibTorch's own kernels would
// give it, instead of OpenMP's initial count (OMP_NUM_THREADS or every core).
// A batch runs its
// matrices in parallel over LibTorch's intra-op threads (oneDNN runs a product
// called inside a parallel region on its caller's thread). Bits depend on the
// shapes and the thread count only, never on the data's addresses.
void OneDnnMatmulInto(const at::Tensor& a, const at::Tensor& b, float beta, at::Tensor& out);

// The threads a product called from this thread runs on (1 inside a parallel
// region); like a product, it gives a fresh thread the intra-op count first.
int OneDnnThreads();

}  // namespace gemm
}  // namespace mtb

#endif  // MTB_COMMON_GEMM_ONEDNN_H_
