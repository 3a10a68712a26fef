#include "common/collective/test_tensors.h"

#include "ATen/ATen.h"
#include "gtest/gtest.h"

namespace mtb::collective {

void ExpectEqual(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  ASSERT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(at::equal(actual, expected)) << "actual:\n"
                                           << actual << "\nexpected:\n"
                                           << expected;
}

void ExpectSameBits(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_EQ(actual.element_size(), expected.element_size());
  const at::ScalarType bits = actual.element_size() == 2 ? at::kShort : at::kInt;
  ASSERT_TRUE(actual.element_size() == 2 || actual.element_size() == 4);
  ExpectEqual(actual.view(bits), expected.view(bits));
}

at::Tensor Ramp(int64_t numel, double factor, at::ScalarType dtype) {
  return (at::arange(1, numel + 1, at::kDouble) * factor).to(dtype);
}

int64_t Triangle(int n) { return static_cast<int64_t>(n) * (n + 1) / 2; }

}  // namespace mtb::collective
