#include "common/libtorch/matmul_peak.h"

#include <algorithm>
#include <chrono>

#include "ATen/ATen.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace mtb {

MatmulPeak MeasureMatmulPeak(const std::string& precision, int size,
                             int repeats) {
  CHECK(precision == "fp32" || precision == "bf16") << precision;
  CHECK_GT(repeats, 0);
  const at::ScalarType dtype =
      precision == "bf16" ? at::kBFloat16 : at::kFloat;
  at::NoGradGuard no_grad;
  // Deterministic inputs; their values do not matter for the timing.
  const at::Tensor a =
      at::linspace(-1, 1, int64_t{size} * size, at::kFloat)
          .view({size, size})
          .to(dtype);
  const at::Tensor b = a.t().contiguous();
  at::Tensor c = at::mm(a, b);  // warm-up (oneDNN primitive creation)
  double best_ms = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    c = at::mm(a, b);
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    best_ms = i == 0 ? ms : std::min(best_ms, ms);
  }
  MatmulPeak peak;
  const double flops = 2.0 * size * static_cast<double>(size) * size;
  peak.flops_per_second = flops / (std::max(best_ms, 1e-6) / 1000.0);
  peak.description = absl::StrFormat("%s matmul %dx%dx%d, best of %d",
                                     precision, size, size, size, repeats);
  return peak;
}

}  // namespace mtb
