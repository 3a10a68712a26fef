#include "tp_check/attention.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class AttentionCheck : public ::testing::TestWithParam<int> {};

TEST_P(AttentionCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunAttentionCheck, GetParam(),
                          DefaultOptionsFor(GetParam()), 6);
}

TEST_P(AttentionCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunAttentionCheck, GetParam(),
                          SmallestOptions(GetParam()), 6);
}

TEST_P(AttentionCheck, OneAllReduceForwardAndOneBackwardOfTheActivations) {
  // S = B*T*D*4 bytes (2048 at n = 1, 2, 4; 2592 at n = 3); 2(n-1)/n of it
  // per rank, each way (exact: T is a multiple of n).
  const int n = GetParam();
  const CheckOptions options = DefaultOptionsFor(n);
  const int64_t s =
      int64_t{4} * options.batch() * options.seq_len() * options.hidden();
  const int64_t bytes = 2 * (n - 1) * s / n;
  ExpectCollectives(RunAttentionCheck, n, options,
                    {{"forward", "all_reduce", 1, bytes},
                     {"backward", "all_reduce", 1, bytes}});
}

TEST_P(AttentionCheck, MoreHeadsThanRanksMatch) {
  CheckOptions options = DefaultOptionsFor(GetParam());
  // Twice the default heads: 2 heads per rank at n = 2 and 4 (8 heads of 4),
  // 4 at n = 3 (12 heads of 3).
  options.set_heads(2 * options.heads());
  ExpectPassesOnEveryRank(RunAttentionCheck, GetParam(), options, 6);
}

TEST_P(AttentionCheck, PerturbedQkvGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunAttentionCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "grad_qkv_weight");
}

TEST_P(AttentionCheck, PerturbedPartialOutputFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunAttentionCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "out");
}

INSTANTIATE_TEST_SUITE_P(Ranks, AttentionCheck, ::testing::Values(1, 2, 3, 4),
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
