#include "common/libtorch/allclose.h"

#include <cmath>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mtb {
namespace {

std::string ShapeText(const at::Tensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "]");
}

std::string UnflattenIndex(int64_t flat, at::IntArrayRef sizes) {
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t dim = static_cast<int64_t>(sizes.size()) - 1; dim >= 0; --dim) {
    index[dim] = flat % sizes[dim];
    flat /= sizes[dim];
  }
  return absl::StrCat("[", absl::StrJoin(index, ", "), "]");
}

}  // namespace

AllCloseResult AllClose(const at::Tensor& actual, const at::Tensor& expected,
                        double rtol, double atol) {
  AllCloseResult result;
  if (actual.sizes() != expected.sizes()) {
    result.message = absl::StrCat("shape mismatch: actual ", ShapeText(actual),
                                  " vs expected ", ShapeText(expected));
    return result;
  }
  if (actual.scalar_type() != expected.scalar_type()) {
    result.message =
        absl::StrCat("dtype mismatch: actual ", c10::toString(actual.scalar_type()),
                     " vs expected ", c10::toString(expected.scalar_type()));
    return result;
  }
  const at::Tensor a = actual.detach().to(at::kCPU, at::kDouble).contiguous().view(-1);
  const at::Tensor e = expected.detach().to(at::kCPU, at::kDouble).contiguous().view(-1);
  const double* a_data = a.data_ptr<double>();
  const double* e_data = e.data_ptr<double>();
  result.numel = a.numel();
  double worst_excess = -INFINITY;
  for (int64_t i = 0; i < result.numel; ++i) {
    const double av = a_data[i];
    const double ev = e_data[i];
    bool close;
    double abs_error;
    double excess;
    if (std::isnan(av) || std::isnan(ev)) {
      close = false;
      abs_error = INFINITY;
      excess = INFINITY;
    } else if (std::isinf(av) || std::isinf(ev)) {
      close = av == ev;
      abs_error = close ? 0 : INFINITY;
      excess = close ? -INFINITY : INFINITY;
    } else {
      abs_error = std::fabs(av - ev);
      const double bound = atol + rtol * std::fabs(ev);
      close = abs_error <= bound;
      excess = abs_error - bound;
    }
    if (!close) ++result.mismatched;
    if (abs_error > result.max_abs_error) result.max_abs_error = abs_error;
    if (ev != 0 && std::isfinite(abs_error)) {
      const double rel_error = abs_error / std::fabs(ev);
      if (rel_error > result.max_rel_error) result.max_rel_error = rel_error;
    } else if (ev == 0 && abs_error > 0) {
      result.max_rel_error = INFINITY;
    }
    if (excess > worst_excess || result.worst_flat_index < 0) {
      worst_excess = excess;
      result.worst_flat_index = i;
      result.worst_actual = av;
      result.worst_expected = ev;
    }
  }
  result.ok = result.mismatched == 0;
  if (result.worst_flat_index >= 0) {
    result.worst_index = UnflattenIndex(result.worst_flat_index, actual.sizes());
  }
  if (result.ok) {
    result.message = absl::StrCat("ok (", result.numel,
                                  " elements, max abs error ",
                                  result.max_abs_error, ")");
  } else {
    const double worst_abs =
        std::fabs(result.worst_actual - result.worst_expected);
    result.message = absl::StrCat(
        result.mismatched, "/", result.numel,
        " elements not close (rtol=", rtol, ", atol=", atol,
        "); worst at ", result.worst_index, ": actual ", result.worst_actual,
        " vs expected ", result.worst_expected, " (abs error ", worst_abs,
        ", rel error ",
        result.worst_expected != 0 ? worst_abs / std::fabs(result.worst_expected)
                                   : INFINITY,
        "); max abs error ", result.max_abs_error, ", max rel error ",
        result.max_rel_error);
  }
  return result;
}

}  // namespace mtb
