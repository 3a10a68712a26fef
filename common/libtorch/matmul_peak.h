// Measured compute peaks: the FLOP/s of every GEMM library this build can run
// the model's matrix products on (common/gemm), in a precision, at given
// shapes, on this process's intra-op threads. The fastest is the trainer's
// MFU denominator (every rank of a host measures at once, as they share the
// cores when training); doctor lists them all.
//
// Libraries:
//   fp32  "onednn"  oneDNN's dnnl_sgemm (the onednn GEMM backend)
//         "blas"    LibTorch's at::mm, i.e. the system BLAS (OpenBLAS)
//   bf16  "libtorch" LibTorch's bf16 at::mm, which runs oneDNN's brgemm: the
//                   kernel both backends use under bf16 autocast
#ifndef MTB_COMMON_LIBTORCH_MATMUL_PEAK_H_
#define MTB_COMMON_LIBTORCH_MATMUL_PEAK_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mtb {

// out (M, N) = x (M, K) · W (N, K)ᵀ: a linear layer's forward layout.
inline constexpr int64_t kMaxGemmRows = 4096;

struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

struct GemmSpeed {
  std::string library;    // see the file comment
  std::string precision;  // "fp32" or "bf16"
  GemmShape shape;
  double flops_per_second = 0;
  // "onednn fp32 1024x1024x1024".
  std::string Describe() const;
};

// The shapes of the model's forward products for `tokens` rows per
// micro-batch (batch x seq_len, at most kMaxGemmRows: more rows do not change
// a product's speed, and a batch too big for memory must fail in its step,
// not here): QKV (3D), attention output (D), MLP up (4D) and down (K = 4D),
// the LM head (V); then the 1024³ reference.
std::vector<GemmShape> ModelGemmShapes(int64_t tokens, int64_t d_model, int64_t vocab_size);

// The libraries measured for `precision` ("fp32" or "bf16").
std::vector<std::string> GemmLibraries(const std::string& precision);

// Every library of `precision` at every shape: one warm-up, then the best of
// `repeats` runs. Deterministic inputs; ~0.1 s per 1024³ fp32 product.
std::vector<GemmSpeed> MeasureGemms(const std::string& precision,
                                    const std::vector<GemmShape>& shapes, int repeats = 5);

// The fastest of `speeds`, or of those of `library` when it is not empty;
// nullptr when there is none.
const GemmSpeed* FastestGemm(const std::vector<GemmSpeed>& speeds, const std::string& library = "");

}  // namespace mtb

#endif  // MTB_COMMON_LIBTORCH_MATMUL_PEAK_H_
