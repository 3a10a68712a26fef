#include "common/nn/dropout.h"

#include <vector>

#include "ATen/ATen.h"
#include "common/libtorch/allclose.h"
#include "common/base/counter_rng.h"
#include "gtest/gtest.h"

namespace mtb {
namespace nn {
namespace {

TEST(CounterDropout, MaskElementFollowsTheDocumentedKey) {
  const at::Tensor keep = DropoutKeepMask({2, 3, 4}, {10, 7}, /*seed=*/5,
                                          /*step=*/3, /*layer=*/1,
                                          DropoutSite::kMlpOutput, 0.5);
  const uint64_t threshold = DropThreshold(0.5);
  const uint64_t key = CounterKey({5, static_cast<uint64_t>(RngStream::kDropout),
                                   3, 7, 1, 2});
  // Row 1 is sample 7; element (1, 2, 3) is flat position 2*4 + 3 = 11.
  EXPECT_EQ(keep[1][2][3].item<bool>(), CounterDraw(key, 11) >= threshold);
}

TEST(CounterDropout, SampleMaskIsTheSameInAnyBatchPosition) {
  const at::Tensor whole = DropoutKeepMask({4, 8, 16}, {0, 1, 2, 3}, 1, 1, 0,
                                           DropoutSite::kAttentionOutput, 0.3);
  // Samples 2 and 3 alone, in reverse order (another rank's slice).
  const at::Tensor part = DropoutKeepMask({2, 8, 16}, {3, 2}, 1, 1, 0,
                                          DropoutSite::kAttentionOutput, 0.3);
  EXPECT_TRUE(at::equal(part[0], whole[3]));
  EXPECT_TRUE(at::equal(part[1], whole[2]));
}

TEST(CounterDropout, MasksDifferAcrossStepsLayersSitesAndSeeds) {
  auto mask = [](uint64_t seed, int64_t step, int64_t layer, DropoutSite site) {
    return DropoutKeepMask({1, 64, 64}, {0}, seed, step, layer, site, 0.5);
  };
  const at::Tensor base = mask(1, 1, 0, DropoutSite::kMlpOutput);
  EXPECT_FALSE(at::equal(base, mask(2, 1, 0, DropoutSite::kMlpOutput)));
  EXPECT_FALSE(at::equal(base, mask(1, 2, 0, DropoutSite::kMlpOutput)));
  EXPECT_FALSE(at::equal(base, mask(1, 1, 1, DropoutSite::kMlpOutput)));
  EXPECT_FALSE(at::equal(base, mask(1, 1, 0, DropoutSite::kAttentionOutput)));
}

TEST(CounterDropout, KeepsAboutOneMinusPAndScalesKeptElements) {
  CounterDropout dropout;
  dropout.p = 0.2;
  dropout.seed = 9;
  dropout.step = 4;
  dropout.sample_indices = {0, 1, 2, 3};
  const at::Tensor x = at::ones({4, 100, 100});
  const at::Tensor y = dropout.Apply(x, 0, DropoutSite::kMlpOutput);
  const double kept_fraction = (y != 0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(kept_fraction, 0.8, 0.01);  // sd 0.002
  const at::Tensor kept = y.masked_select(y != 0);
  EXPECT_TRUE(AllClose(kept, at::full_like(kept, 1.0 / 0.8)).ok);
}

TEST(CounterDropout, DisabledIsTheIdentity) {
  CounterDropout dropout;  // p = 0
  const at::Tensor x = at::randn({2, 3});
  EXPECT_TRUE(dropout.Apply(x, 0, DropoutSite::kMlpOutput).is_same(x));
}

TEST(CounterDropout, ApplyIsApplyDropoutMaskOfTheSampleMask) {
  const at::Tensor x = at::arange(2 * 3 * 4, at::kFloat).view({2, 3, 4});
  const CounterDropout dropout{0.4, 9, 2, {5, 6}};
  const at::Tensor keep = DropoutKeepMask({2, 3, 4}, {5, 6}, 9, 2, 1,
                                          DropoutSite::kMlpOutput, 0.4);
  const at::Tensor applied = dropout.Apply(x, 1, DropoutSite::kMlpOutput);
  EXPECT_TRUE(at::equal(applied, ApplyDropoutMask(x, keep, 0.4)));
  // A slice of positions (a sequence shard) with the matching mask slice.
  EXPECT_TRUE(at::equal(applied.narrow(1, 1, 2),
                        ApplyDropoutMask(x.narrow(1, 1, 2),
                                         keep.narrow(1, 1, 2), 0.4)));
}

// Tensor parallelism holds contiguous parts of a sample: a part's mask is
// that slice of the whole sample's mask, so the parts of a group are distinct
// draws that together make the one-rank mask.
TEST(CounterDropout, PartsOfASampleDrawTheirSliceOfItsMask) {
  const std::vector<int64_t> samples = {4, 11};
  // (B, H, T, T) attention probabilities, 4 heads in two shards of 2.
  const at::Tensor whole = DropoutKeepMask(
      {2, 4, 6, 6}, samples, 3, 2, 1, DropoutSite::kAttentionProbabilities,
      0.5);
  std::vector<at::Tensor> shards;
  for (int64_t shard = 0; shard < 2; ++shard) {
    shards.push_back(DropoutKeepMask(
        {2, 2, 6, 6}, samples, 3, 2, 1, DropoutSite::kAttentionProbabilities,
        0.5, /*first_element=*/shard * 2 * 6 * 6));
    EXPECT_TRUE(at::equal(shards.back(), whole.narrow(1, shard * 2, 2)));
  }
  EXPECT_FALSE(at::equal(shards[0], shards[1]))
      << "the two head shards drew the same mask";
  // A (B, T, D) sequence shard: positions [3, 6) of 6.
  const CounterDropout dropout{0.4, 9, 2, samples};
  const at::Tensor x = at::arange(2 * 6 * 5, at::kFloat).view({2, 6, 5}) + 1;
  const at::Tensor second_half =
      dropout.ApplyToPart(x.narrow(1, 3, 3).contiguous(), 3 * 5, 0,
                          DropoutSite::kMlpOutput);
  const at::Tensor applied = dropout.Apply(x, 0, DropoutSite::kMlpOutput);
  EXPECT_TRUE(at::equal(second_half, applied.narrow(1, 3, 3)));
  EXPECT_FALSE(at::equal(
      dropout.ApplyToPart(x.narrow(1, 0, 3).contiguous(), 0, 0,
                          DropoutSite::kMlpOutput) != 0,
      second_half != 0))
      << "the two sequence shards drew the same mask";
  // Disabled: the identity, as Apply.
  const at::Tensor y = at::randn({2, 3});
  EXPECT_TRUE(CounterDropout{}.ApplyToPart(y, 7, 0, DropoutSite::kMlpOutput)
                  .is_same(y));
}

}  // namespace
}  // namespace nn
}  // namespace mtb
