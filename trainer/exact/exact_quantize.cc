// Blocks of kBlock values: a max-abs pass and a quantize-and-add pass over
// the same block while it is in L1, each a plain loop the compiler
// vectorises (the double conversion and round-to-int64 need AVX-512DQ for
// full width; the AVX2 and baseline clones convert lane by lane).
#include "trainer/exact/exact_quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace mtb {
namespace {

constexpr int64_t kBlock = 2048;

}  // namespace

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
QuantizeScan QuantizeAndAccumulate(const float* values, int64_t count, double scale, double limit,
                                   int64_t* accumulator) {
  QuantizeScan scan;
  float max_abs = 0;
  bool finite = true;
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(kBlock, count - begin);
    const float* block = values + begin;
    int64_t* sums = accumulator + begin;
    float block_max = 0;
    bool block_finite = true;
    for (int64_t i = 0; i < n; ++i) {
      const float magnitude = std::fabs(block[i]);
      block_finite &= magnitude <= FLT_MAX;  // false for NaN and infinity
      block_max = magnitude > block_max ? magnitude : block_max;
    }
    finite &= block_finite;
    max_abs = std::max(max_abs, block_max);
    if (block_finite && static_cast<double>(block_max) <= limit) {
      for (int64_t i = 0; i < n; ++i) {
        // nearbyint rounds half to even in the default rounding mode, as
        // LibTorch's round_ does.
        sums[i] += static_cast<int64_t>(std::nearbyint(static_cast<double>(block[i]) * scale));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const double scaled = static_cast<double>(block[i]) * scale;
        if (std::fabs(static_cast<double>(block[i])) <= limit) {
          sums[i] += static_cast<int64_t>(std::nearbyint(scaled));
        }
      }
    }
  }
  scan.max_abs = max_abs;
  scan.finite = finite;
  return scan;
}

}  // namespace mtb
