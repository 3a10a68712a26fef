#include "tp_check/row_linear.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class RowLinearCheck : public ::testing::TestWithParam<int> {};

TEST_P(RowLinearCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunRowLinearCheck, GetParam(),
                          DefaultOptionsFor(GetParam()), 4);
}

TEST_P(RowLinearCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunRowLinearCheck, GetParam(),
                          SmallestOptions(GetParam()), 4);
}

TEST_P(RowLinearCheck, OneAllReduceOfTheOutputForwardAndNothingBackward) {
  // S = B*T*D*4 bytes (2048 at n = 1, 2, 4; 2592 at n = 3); 2(n-1)/n of it
  // per rank (exact: T is a multiple of n).
  const int n = GetParam();
  const CheckOptions options = DefaultOptionsFor(n);
  const int64_t s =
      int64_t{4} * options.batch() * options.seq_len() * options.hidden();
  ExpectCollectives(RunRowLinearCheck, n, options,
                    {{"forward", "all_reduce", 1, 2 * (n - 1) * s / n}});
}

TEST_P(RowLinearCheck, PerturbedPartialOutputFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunRowLinearCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "out");
}

TEST_P(RowLinearCheck, PerturbedInputGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunRowLinearCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "grad_input");
}

INSTANTIATE_TEST_SUITE_P(Ranks, RowLinearCheck, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(RowLinearCheck, InputWidthNotDivisibleByRanksIsRejected) {
  CheckOptions options = DefaultCheckOptions();
  options.set_ffn_hidden(30);
  const absl::Status status = ValidateRowLinear(options, NprocWorld(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      status.message().find("--ffn_hidden=30 is not divisible by --nproc=4"),
      absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace mtb::tp_check
