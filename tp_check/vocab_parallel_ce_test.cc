#include "tp_check/vocab_parallel_ce.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class VocabParallelCeCheck : public ::testing::TestWithParam<int> {};

TEST_P(VocabParallelCeCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunVocabParallelCeCheck, GetParam(),
                          DefaultCheckOptions(), 6);
}

TEST_P(VocabParallelCeCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunVocabParallelCeCheck, GetParam(),
                          SmallestOptions(GetParam()), 6);
}

TEST_P(VocabParallelCeCheck, FourAllReducesForwardOneBackward) {
  // Embedding output and LM-head input gradient: S = B*T*D*4 = 2048 bytes;
  // max, target logit, sum of exponentials: S = B*T*4 = 64 bytes each. A rank
  // moves 2(n-1)/n of each.
  const int n = GetParam();
  const int64_t activations = n == 1 ? 0 : n == 2 ? 2048 : 3072;
  const int64_t per_token = n == 1 ? 0 : n == 2 ? 64 : 96;
  ExpectCollectives(RunVocabParallelCeCheck, n, DefaultCheckOptions(),
                    {{"forward", "all_reduce", 4, activations + 3 * per_token},
                     {"backward", "all_reduce", 1, activations}});
}

TEST_P(VocabParallelCeCheck, NoRankHoldsMoreThanItsVocabularyShard) {
  const int n = GetParam();
  auto results =
      RunOnThreads(RunVocabParallelCeCheck, n, DefaultCheckOptions());
  ASSERT_TRUE(results.ok()) << results.status();
  for (const auto& result : *results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->vocab_shard_columns(), 64 / n);
    EXPECT_EQ(result->largest_logits_columns(), 64 / n);
    const TensorCheck* logits = FindTensor(*result, "logits");
    ASSERT_NE(logits, nullptr);
    EXPECT_EQ(logits->shape(2), 64 / n);
  }
}

TEST_P(VocabParallelCeCheck, PerturbedLossFailsNamingIt) {
  ExpectPerturbationIsNamed(RunVocabParallelCeCheck, GetParam(),
                            DefaultCheckOptions(), "loss");
}

TEST_P(VocabParallelCeCheck, PerturbedEmbeddingGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunVocabParallelCeCheck, GetParam(),
                            DefaultCheckOptions(), "grad_wte");
}

INSTANTIATE_TEST_SUITE_P(Ranks, VocabParallelCeCheck,
                         ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

TEST(VocabParallelCeCheck, VocabularyNotDivisibleByRanksIsRejected) {
  CheckOptions options = DefaultCheckOptions();
  options.set_vocab(50);
  const absl::Status status = ValidateVocabParallelCe(options, NprocWorld(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--vocab=50 is not divisible by --nproc=4"),
            absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace mtb::tp_check
