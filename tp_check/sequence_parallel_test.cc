#include "tp_check/sequence_parallel.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class SequenceParallelCheck : public ::testing::TestWithParam<int> {};

TEST_P(SequenceParallelCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunSequenceParallelCheck, GetParam(),
                          DefaultOptionsFor(GetParam()), 8);
}

TEST_P(SequenceParallelCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunSequenceParallelCheck, GetParam(),
                          SmallestOptions(GetParam()), 8);
}

TEST_P(SequenceParallelCheck,
       AllGatherAndReduceScatterEachWayPlusOneGradAllReduce) {
  // Activations S = B*T*D*4 bytes (2048 at n = 1, 2, 4; 2592 at n = 3):
  // all-gather and reduce-scatter move (n-1)/n of it per rank. Partial
  // gradients: 3D floats (384 bytes; 432), 2(n-1)/n of it. Exact: T and 3
  // are multiples of n = 3, T of n = 2 and 4, and 3D*4 of 2 and 4.
  const int n = GetParam();
  const CheckOptions options = DefaultOptionsFor(n);
  const int64_t s =
      int64_t{4} * options.batch() * options.seq_len() * options.hidden();
  const int64_t activations = (n - 1) * s / n;
  const int64_t grads = 2 * (n - 1) * (int64_t{3} * options.hidden() * 4) / n;
  ExpectCollectives(RunSequenceParallelCheck, n, options,
                    {{"forward", "all_gather", 1, activations},
                     {"forward", "reduce_scatter", 1, activations},
                     {"backward", "all_gather", 1, activations},
                     {"backward", "reduce_scatter", 1, activations},
                     {"backward", "all_reduce", 1, grads}});
}

TEST_P(SequenceParallelCheck, HeavyDropoutMasksMatchTheReference) {
  CheckOptions options = DefaultOptionsFor(GetParam());
  options.set_dropout(0.5);
  ExpectPassesOnEveryRank(RunSequenceParallelCheck, GetParam(), options, 8);
}

TEST_P(SequenceParallelCheck, NoDropoutMatches) {
  CheckOptions options = DefaultOptionsFor(GetParam());
  options.set_dropout(0.0);
  ExpectPassesOnEveryRank(RunSequenceParallelCheck, GetParam(), options, 8);
}

TEST_P(SequenceParallelCheck, PerturbedLayerNormGradientFailsNamingIt) {
  ExpectPerturbationIsNamed(RunSequenceParallelCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "grad_ln_weight");
}

TEST_P(SequenceParallelCheck, PerturbedPartialOutputFailsNamingTheOutput) {
  ExpectPerturbationIsNamed(RunSequenceParallelCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "out");
}

INSTANTIATE_TEST_SUITE_P(Ranks, SequenceParallelCheck,
                         ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(SequenceParallelCheck, SequenceNotDivisibleByRanksIsRejected) {
  CheckOptions options = DefaultCheckOptions();
  options.set_seq_len(6);
  const absl::Status status = ValidateSequenceParallel(options, NprocWorld(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--seq_len=6 is not divisible by --nproc=4"),
            absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace mtb::tp_check
