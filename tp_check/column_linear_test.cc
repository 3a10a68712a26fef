#include "tp_check/column_linear.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class ColumnLinearCheck : public ::testing::TestWithParam<int> {};

TEST_P(ColumnLinearCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunColumnLinearCheck, GetParam(),
                          DefaultCheckOptions(), 4);
}

TEST_P(ColumnLinearCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunColumnLinearCheck, GetParam(),
                          SmallestOptions(GetParam()), 4);
}

TEST_P(ColumnLinearCheck,
       GatheredOutputAllGathersForwardAndAllReducesBackward) {
  // Output S = B*T*F*4 = 8192 bytes, (n-1)/n of it per rank; input gradient
  // S = B*T*D*4 = 2048 bytes, 2(n-1)/n of it per rank.
  const int n = GetParam();
  ExpectCollectives(RunColumnLinearCheck, n, DefaultCheckOptions(),
                    {{"forward", "all_gather", 1,
                      n == 1   ? 0
                      : n == 2 ? 4096
                               : 6144},
                     {"backward", "all_reduce", 1,
                      n == 1   ? 0
                      : n == 2 ? 2048
                               : 3072}});
}

TEST_P(ColumnLinearCheck, ShardedOutputMatchesTheReferenceSliceWithoutGather) {
  CheckOptions options = DefaultCheckOptions();
  options.set_gather_output(false);
  ExpectPassesOnEveryRank(RunColumnLinearCheck, GetParam(), options, 4);
  const int n = GetParam();
  ExpectCollectives(RunColumnLinearCheck, n, options,
                    {{"backward", "all_reduce", 1,
                      n == 1   ? 0
                      : n == 2 ? 2048
                               : 3072}});
}

TEST_P(ColumnLinearCheck, PerturbedOutputShardFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunColumnLinearCheck, GetParam(),
                            DefaultCheckOptions(), "out");
}

TEST_P(ColumnLinearCheck, PerturbedWeightGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunColumnLinearCheck, GetParam(),
                            DefaultCheckOptions(), "grad_weight");
}

INSTANTIATE_TEST_SUITE_P(Ranks, ColumnLinearCheck, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(ColumnLinearCheck, OutputWidthNotDivisibleByRanksIsRejected) {
  CheckOptions options = DefaultCheckOptions();
  options.set_ffn_hidden(30);
  const absl::Status status = ValidateColumnLinear(options, NprocWorld(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      status.message().find("--ffn_hidden=30 is not divisible by --nproc=4"),
      absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace mtb::tp_check
