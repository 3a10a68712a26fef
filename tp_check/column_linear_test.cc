#include "tp_check/column_linear.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class ColumnLinearCheck : public ::testing::TestWithParam<int> {};

TEST_P(ColumnLinearCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunColumnLinearCheck, GetParam(),
                          DefaultOptionsFor(GetParam()), 4);
}

TEST_P(ColumnLinearCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunColumnLinearCheck, GetParam(),
                          SmallestOptions(GetParam()), 4);
}

TEST_P(ColumnLinearCheck,
       GatheredOutputAllGathersForwardAndAllReducesBackward) {
  // Output S = B*T*F*4 bytes (8192 at n = 1, 2, 4; 9288 at n = 3), (n-1)/n
  // of it per rank; input gradient S = B*T*D*4 bytes (2048; 2592), 2(n-1)/n
  // of it per rank. Exact: F and T are multiples of n.
  const int n = GetParam();
  const CheckOptions options = DefaultOptionsFor(n);
  const int64_t tokens = int64_t{4} * options.batch() * options.seq_len();
  const int64_t output = tokens * options.ffn_hidden();
  const int64_t input_grad = tokens * options.hidden();
  ExpectCollectives(
      RunColumnLinearCheck, n, options,
      {{"forward", "all_gather", 1, (n - 1) * output / n},
       {"backward", "all_reduce", 1, 2 * (n - 1) * input_grad / n}});
}

TEST_P(ColumnLinearCheck, ShardedOutputMatchesTheReferenceSliceWithoutGather) {
  CheckOptions options = DefaultOptionsFor(GetParam());
  options.set_gather_output(false);
  ExpectPassesOnEveryRank(RunColumnLinearCheck, GetParam(), options, 4);
  const int n = GetParam();
  const int64_t input_grad =
      int64_t{4} * options.batch() * options.seq_len() * options.hidden();
  ExpectCollectives(
      RunColumnLinearCheck, n, options,
      {{"backward", "all_reduce", 1, 2 * (n - 1) * input_grad / n}});
}

TEST_P(ColumnLinearCheck, PerturbedOutputShardFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunColumnLinearCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "out");
}

TEST_P(ColumnLinearCheck, PerturbedWeightGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunColumnLinearCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "grad_weight");
}

INSTANTIATE_TEST_SUITE_P(Ranks, ColumnLinearCheck,
                         ::testing::Values(1, 2, 3, 4),
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
