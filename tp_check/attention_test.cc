#include "tp_check/attention.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class AttentionCheck : public ::testing::TestWithParam<int> {};

TEST_P(AttentionCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunAttentionCheck, GetParam(), DefaultCheckOptions(),
                          6);
}

TEST_P(AttentionCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunAttentionCheck, GetParam(),
                          SmallestOptions(GetParam()), 6);
}

TEST_P(AttentionCheck, OneAllReduceForwardAndOneBackwardOfTheActivations) {
  // S = B*T*D*4 = 2048 bytes; 2(n-1)/n of it per rank, each way.
  const int n = GetParam();
  const int64_t bytes = n == 1 ? 0 : n == 2 ? 2048 : 3072;
  ExpectCollectives(RunAttentionCheck, n, DefaultCheckOptions(),
                    {{"forward", "all_reduce", 1, bytes},
                     {"backward", "all_reduce", 1, bytes}});
}

TEST_P(AttentionCheck, MoreHeadsThanRanksMatch) {
  CheckOptions options = DefaultCheckOptions();
  options.set_heads(8);  // 2 heads of 4 per rank at n = 4
  ExpectPassesOnEveryRank(RunAttentionCheck, GetParam(), options, 6);
}

TEST_P(AttentionCheck, PerturbedQkvGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunAttentionCheck, GetParam(),
                            DefaultCheckOptions(), "grad_qkv_weight");
}

TEST_P(AttentionCheck, PerturbedPartialOutputFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunAttentionCheck, GetParam(),
                            DefaultCheckOptions(), "out");
}

INSTANTIATE_TEST_SUITE_P(Ranks, AttentionCheck, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(AttentionCheck, HeadsNotDivisibleByRanksIsRejected) {
  CheckOptions options = DefaultCheckOptions();
  options.set_heads(6);
  options.set_hidden(36);
  const absl::Status status = ValidateAttention(options, NprocWorld(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--heads=6 is not divisible by --nproc=4"),
            absl::string_view::npos)
      << status;
}

TEST(AttentionCheck, HiddenNotDivisibleByHeadsIsRejected) {
  CheckOptions options = DefaultCheckOptions();
  options.set_hidden(30);
  const absl::Status status = ValidateAttention(options, NprocWorld(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--hidden=30 is not divisible by --heads=4"),
            absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace mtb::tp_check
