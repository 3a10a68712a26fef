// Exact mode's per-chunk kernel (exact.h, "grid"): one pass over a chunk's
// fp32 gradient that finds its max-abs and adds its values, on the grid, to
// the int64 accumulator. Torch-free and built with -O3, for AVX-512, AVX2 and
// the baseline (GCC target_clones), like the shared-memory reductions: it
// replaces six LibTorch passes (abs, max, to double, scale, round, to int64)
// and three temporaries per tensor per chunk.
#ifndef MTB_TRAINER_EXACT_EXACT_QUANTIZE_H_
#define MTB_TRAINER_EXACT_EXACT_QUANTIZE_H_

#include <cstdint>

namespace mtb {

struct QuantizeScan {
  float max_abs = 0;   // over the finite values
  bool finite = true;  // false if any value is NaN or infinite
};

// For i in [0, count): accumulator[i] += round_half_even(values[i] * scale)
// where |values[i]| <= limit (scale a power of two: the product is exact);
// values beyond `limit` (or not finite) are left out: the caller's verdict
// redoes the step on a coarser grid, from a zeroed accumulator. The result
// is what `|values|.max()`, `values.double() * scale`, `round_()` and
// `to(int64)` give in LibTorch, bit for bit.
QuantizeScan QuantizeAndAccumulate(const float* values, int64_t count, double scale, double limit,
                                   int64_t* accumulator);

}  // namespace mtb

#endif  // MTB_TRAINER_EXACT_EXACT_QUANTIZE_H_
