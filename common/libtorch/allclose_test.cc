#include "common/libtorch/allclose.h"

#include <cmath>
#include <limits>
#include <string>

#include "ATen/ATen.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(AllClose, IdenticalTensorsAreClose) {
  at::Tensor a = at::arange(12, at::kFloat).view({3, 4});
  AllCloseResult result = AllClose(a, a.clone());
  EXPECT_TRUE(result.ok) << result.message;
  EXPECT_EQ(result.mismatched, 0);
  EXPECT_EQ(result.max_abs_error, 0);
}

TEST(AllClose, BoundIsAtolPlusRtolTimesExpected) {
  // expected 100: bound = 1e-5 + 1.3e-6 * 100 = 1.4e-4.
  at::Tensor expected = at::full({1}, 100.0, at::kDouble);
  EXPECT_TRUE(AllClose(expected + 1.3e-4, expected).ok);
  EXPECT_FALSE(AllClose(expected + 1.5e-4, expected).ok);
  // The bound scales with |expected|, not |actual| (torch.testing semantics).
  EXPECT_TRUE(AllClose(at::full({1}, 1.0, at::kDouble),
                       at::full({1}, 2.0, at::kDouble), /*rtol=*/0.5,
                       /*atol=*/0)
                  .ok);
  EXPECT_FALSE(AllClose(at::full({1}, 2.0, at::kDouble),
                        at::full({1}, 1.0, at::kDouble), /*rtol=*/0.5,
                        /*atol=*/0)
                   .ok);
}

TEST(AllClose, ReportsTheWorstElementWithItsIndexAndBothValues) {
  at::Tensor expected = at::zeros({2, 3}, at::kFloat);
  at::Tensor actual = expected.clone();
  actual[1][2] = 0.5;
  actual[0][1] = 0.25;
  AllCloseResult result = AllClose(actual, expected);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.mismatched, 2);
  EXPECT_EQ(result.numel, 6);
  EXPECT_EQ(result.worst_flat_index, 5);
  EXPECT_EQ(result.worst_index, "[1, 2]");
  EXPECT_EQ(result.worst_actual, 0.5);
  EXPECT_EQ(result.worst_expected, 0);
  EXPECT_DOUBLE_EQ(result.max_abs_error, 0.5);
  EXPECT_NE(result.message.find("[1, 2]"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("2/6"), std::string::npos) << result.message;
}

TEST(AllClose, ShapeAndDtypeMismatchesAreReported) {
  AllCloseResult shape = AllClose(at::zeros({2, 3}), at::zeros({3, 2}));
  EXPECT_FALSE(shape.ok);
  EXPECT_NE(shape.message.find("shape mismatch"), std::string::npos);
  AllCloseResult dtype =
      AllClose(at::zeros({2}, at::kFloat), at::zeros({2}, at::kDouble));
  EXPECT_FALSE(dtype.ok);
  EXPECT_NE(dtype.message.find("dtype mismatch"), std::string::npos);
}

TEST(AllClose, NanIsNeverCloseAndInfinitiesMustMatch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  at::Tensor with_nan = at::full({2}, nan);
  EXPECT_FALSE(AllClose(with_nan, with_nan.clone()).ok);
  at::Tensor with_inf = at::full({2}, inf);
  EXPECT_TRUE(AllClose(with_inf, with_inf.clone()).ok);
  EXPECT_FALSE(AllClose(with_inf, -with_inf).ok);
  EXPECT_FALSE(AllClose(with_inf, at::full({2}, 1e30f)).ok);
}

TEST(AllClose, NonContiguousInputsCompareByLogicalIndex) {
  at::Tensor base = at::arange(6, at::kFloat).view({2, 3});
  at::Tensor transposed = base.t();  // (3, 2), non-contiguous
  at::Tensor expected = transposed.contiguous();
  EXPECT_TRUE(AllClose(transposed, expected).ok);
}

}  // namespace
}  // namespace mtb
