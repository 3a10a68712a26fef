// Tensors with closed-form collective results and exact comparisons, for the
// collective layer's tests (testonly).
#ifndef MTB_COMMON_COLLECTIVE_TEST_TENSORS_H_
#define MTB_COMMON_COLLECTIVE_TEST_TENSORS_H_

#include <cstdint>

#include "ATen/core/Tensor.h"

namespace mtb::collective {

// Exact equality of values, shapes and dtypes (gtest failure printing both).
void ExpectEqual(const at::Tensor& actual, const at::Tensor& expected);

// Bit-for-bit equality of two 2- or 4-byte tensors (bfloat16, float32): NaN
// payloads and signed zeros included.
void ExpectSameBits(const at::Tensor& actual, const at::Tensor& expected);

// 1, 2, ..., numel times `factor`, in `dtype` (small integers: exact in every
// dtype the tests use, so any reduction order gives the same bits).
at::Tensor Ramp(int64_t numel, double factor, at::ScalarType dtype = at::kFloat);

// n(n+1)/2: the sum of (rank + 1) over n ranks.
int64_t Triangle(int n);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_TEST_TENSORS_H_
