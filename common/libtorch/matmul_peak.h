// A measured compute peak: the best FLOP/s of a square matmul in a precision,
// on this process's intra-op threads. The trainer's MFU denominator (docs/trainer.md;
// every rank of a host measures at once, as they share the cores when
// training) and doctor's host check.
#ifndef MTB_COMMON_LIBTORCH_MATMUL_PEAK_H_
#define MTB_COMMON_LIBTORCH_MATMUL_PEAK_H_

#include <string>

namespace mtb {

struct MatmulPeak {
  double flops_per_second = 0;
  // "fp32 matmul 1024x1024x1024, best of 5".
  std::string description;
};

// `precision`: "fp32" or "bf16" (bf16 inputs, LibTorch's CPU bf16 matmul,
// as autocast runs it). One warm-up, then the best of `repeats`; ~0.1-0.5 s.
MatmulPeak MeasureMatmulPeak(const std::string& precision, int size = 1024,
                             int repeats = 5);

}  // namespace mtb

#endif  // MTB_COMMON_LIBTORCH_MATMUL_PEAK_H_
