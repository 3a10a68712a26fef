#include "tp_check/mlp.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class MlpCheck : public ::testing::TestWithParam<int> {};

TEST_P(MlpCheck, DefaultSizesMatchTheUnshardedMlpOnEveryRank) {
  ExpectPassesOnEveryRank(RunMlpCheck, GetParam(), DefaultCheckOptions(), 6);
}

TEST_P(MlpCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunMlpCheck, GetParam(), SmallestOptions(GetParam()),
                          6);
}

TEST_P(MlpCheck, OneAllReduceForwardAndOneBackwardOfTheActivations) {
  // S = B*T*D*4 = 2*8*32*4 = 2048 bytes; a rank moves 2(n-1)/n * S each way.
  const int n = GetParam();
  const int64_t bytes = n == 1 ? 0 : n == 2 ? 2048 : 3072;
  ExpectCollectives(RunMlpCheck, n, DefaultCheckOptions(),
                    {{"forward", "all_reduce", 1, bytes},
                     {"backward", "all_reduce", 1, bytes}});
}

TEST_P(MlpCheck, PerturbedWeightGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunMlpCheck, GetParam(), DefaultCheckOptions(),
                            "grad_fc_weight");
}

TEST_P(MlpCheck, PerturbedPartialOutputFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunMlpCheck, GetParam(), DefaultCheckOptions(),
                            "out");
}

INSTANTIATE_TEST_SUITE_P(Ranks, MlpCheck, ::testing::Values(1, 2, 4),
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
