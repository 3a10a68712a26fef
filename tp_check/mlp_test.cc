#include "tp_check/mlp.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class MlpCheck : public ::testing::TestWithParam<int> {};

TEST_P(MlpCheck, DefaultSizesMatchTheUnshardedMlpOnEveryRank) {
  ExpectPassesOnEveryRank(RunMlpCheck, GetParam(),
                          DefaultOptionsFor(GetParam()), 6);
}

TEST_P(MlpCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunMlpCheck, GetParam(), SmallestOptions(GetParam()),
                          6);
}

TEST_P(MlpCheck, OneAllReduceForwardAndOneBackwardOfTheActivations) {
  // S = B*T*D*4 bytes (2*8*32*4 = 2048 at n = 1, 2, 4; 2*9*36*4 = 2592 at
  // n = 3); a rank moves 2(n-1)/n * S each way (exact: T is a multiple of n).
  const int n = GetParam();
  const CheckOptions options = DefaultOptionsFor(n);
  const int64_t s =
      int64_t{4} * options.batch() * options.seq_len() * options.hidden();
  const int64_t bytes = 2 * (n - 1) * s / n;
  ExpectCollectives(RunMlpCheck, n, options,
                    {{"forward", "all_reduce", 1, bytes},
                     {"backward", "all_reduce", 1, bytes}});
}

TEST_P(MlpCheck, PerturbedWeightGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunMlpCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "grad_fc_weight");
}

TEST_P(MlpCheck, PerturbedPartialOutputFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunMlpCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "out");
}

INSTANTIATE_TEST_SUITE_P(Ranks, MlpCheck, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(MlpCheck, FfnWidthNotDivisibleByRanksIsRejectedWithTheArithmetic) {
  CheckOptions options = DefaultCheckOptions();
  options.set_ffn_hidden(30);
  const absl::Status status = ValidateMlp(options, NprocWorld(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--ffn_hidden=30 is not divisible by "
                                  "--nproc=4"),
            absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace mtb::tp_check
