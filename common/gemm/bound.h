// The classic bound on a floating-point dot product (Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., §3.1): summing n products in
// fp32 in *any* order errs by at most
//   |fl(Σ a_k b_k) - Σ a_k b_k| <= γ_n Σ |a_k| |b_k|,  γ_n = n u / (1 - n u),
// u = 2^-24 (fp32's unit roundoff). Two implementations that sum in different
// orders (oneDNN's blocking, OpenBLAS's) therefore differ by at most
// 2 γ_n Σ |a_k| |b_k| per element. docs/gemm.md carries this through the model.
#ifndef MTB_COMMON_GEMM_BOUND_H_
#define MTB_COMMON_GEMM_BOUND_H_

#include <cstdint>

#include "glog/logging.h"

namespace mtb {
namespace gemm {

inline constexpr double kFp32UnitRoundoff = 1.0 / (1 << 24);

// γ_n for fp32 (n u < 1 required).
inline double Fp32Gamma(int64_t n) {
  const double nu = static_cast<double>(n) * kFp32UnitRoundoff;
  CHECK_LT(nu, 1.0) << n;
  return nu / (1 - nu);
}

}  // namespace gemm
}  // namespace mtb

#endif  // MTB_COMMON_GEMM_BOUND_H_
