// The repo's one tensor comparison, with torch.testing.assert_close semantics:
// every element must satisfy |actual - expected| <= atol + rtol * |expected|,
// shapes and dtypes must match, NaN never equals NaN (equal_nan=False) and
// infinities must match exactly.
#ifndef MTB_COMMON_LIBTORCH_ALLCLOSE_H_
#define MTB_COMMON_LIBTORCH_ALLCLOSE_H_

#include <cstdint>
#include <string>

#include "ATen/core/Tensor.h"

namespace mtb {

// torch.testing's defaults for float32.
inline constexpr double kFp32Rtol = 1.3e-6;
inline constexpr double kFp32Atol = 1e-5;

struct AllCloseResult {
  bool ok = false;
  // Elements that broke the bound, out of `numel`.
  int64_t mismatched = 0;
  int64_t numel = 0;
  // The element with the largest |actual - expected| - (atol + rtol *
  // |expected|) (the worst violation; when ok, the one closest to the bound),
  // as a flat index and per-dimension index "[i, j, ...]".
  int64_t worst_flat_index = -1;
  std::string worst_index;
  double worst_actual = 0;
  double worst_expected = 0;
  // Largest absolute and relative (|a - e| / |e|) errors over all elements.
  double max_abs_error = 0;
  double max_rel_error = 0;
  // One line: "ok" or what differs, naming the worst element.
  std::string message;
};

// Compares in float64 on the CPU. Never throws for shape/dtype mismatches; they
// are reported in the result.
AllCloseResult AllClose(const at::Tensor& actual, const at::Tensor& expected,
                        double rtol = kFp32Rtol, double atol = kFp32Atol);

}  // namespace mtb

#endif  // MTB_COMMON_LIBTORCH_ALLCLOSE_H_
