#include "common/nn/init.h"

#include "ATen/ATen.h"
#include "common/base/counter_rng.h"
#include "gtest/gtest.h"

namespace mtb {
namespace nn {
namespace {

TEST(CounterNormalTensor, ElementIsTheScaledDrawOfItsFlatIndex) {
  const uint64_t key = CounterKey({7, 3, 1});
  const at::Tensor tensor = CounterNormalTensor({3, 5}, key, 0.5);
  ASSERT_EQ(tensor.scalar_type(), at::kFloat);
  ASSERT_EQ(tensor.sizes(), at::IntArrayRef({3, 5}));
  EXPECT_EQ(tensor[2][1].item<float>(),
            static_cast<float>(0.5 * CounterNormal(key, 2 * 5 + 1)));
  EXPECT_FALSE(tensor.requires_grad());
}

TEST(CounterNormalTensor, SameKeySameTensorOtherKeyOtherTensor) {
  const at::Tensor a = CounterNormalTensor({64}, CounterKey({1, 2}));
  EXPECT_TRUE(at::equal(a, CounterNormalTensor({64}, CounterKey({1, 2}))));
  EXPECT_FALSE(at::equal(a, CounterNormalTensor({64}, CounterKey({1, 3}))));
}

}  // namespace
}  // namespace nn
}  // namespace mtb
