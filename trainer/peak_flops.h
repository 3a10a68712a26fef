// A measured compute peak for MFU (SPEC §4 "Model"): the best FLOP/s of a
// square matmul in the run's precision, on this rank's intra-op threads, while
// the other ranks of the host measure too (they share the cores, as they do
// when training).
#ifndef MTB_TRAINER_PEAK_FLOPS_H_
#define MTB_TRAINER_PEAK_FLOPS_H_

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

#endif  // MTB_TRAINER_PEAK_FLOPS_H_
