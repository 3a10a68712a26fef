#include "tp_check/vocab_parallel_ce.h"

#include "gtest/gtest.h"
#include "tp_check/test_util.h"

namespace mtb::tp_check {
namespace {

class VocabParallelCeCheck : public ::testing::TestWithParam<int> {};

TEST_P(VocabParallelCeCheck, DefaultSizesMatchTheUnshardedLayerOnEveryRank) {
  ExpectPassesOnEveryRank(RunVocabParallelCeCheck, GetParam(),
                          DefaultOptionsFor(GetParam()), 6);
}

TEST_P(VocabParallelCeCheck, BatchOneAtTheSmallestLegalSizesMatches) {
  ExpectPassesOnEveryRank(RunVocabParallelCeCheck, GetParam(),
                          SmallestOptions(GetParam()), 6);
}

TEST_P(VocabParallelCeCheck, FourAllReducesForwardOneBackward) {
  // Embedding output and LM-head input gradient: S = B*T*D*4 bytes (2048 at
  // n = 1, 2, 4; 2592 at n = 3); max, target logit, sum of exponentials:
  // S = B*T*4 bytes (64; 72) each. A rank moves 2(n-1)/n of each (exact: T
  // is a multiple of n).
  const int n = GetParam();
  const CheckOptions options = DefaultOptionsFor(n);
  const int64_t tokens = int64_t{4} * options.batch() * options.seq_len();
  const int64_t activations = 2 * (n - 1) * tokens * options.hidden() / n;
  const int64_t per_token = 2 * (n - 1) * tokens / n;
  ExpectCollectives(RunVocabParallelCeCheck, n, options,
                    {{"forward", "all_reduce", 4, activations + 3 * per_token},
                     {"backward", "all_reduce", 1, activations}});
}

TEST_P(VocabParallelCeCheck, NoRankHoldsMoreThanItsVocabularyShard) {
  const int n = GetParam();
  auto results =
      RunOnThreads(RunVocabParallelCeCheck, n, DefaultOptionsFor(GetParam()));
  ASSERT_TRUE(results.ok()) << results.status();
  for (const auto& result : *results) {
    ASSERT_TRUE(result.ok()) << result.status();
    const int vocab = DefaultOptionsFor(n).vocab();  // 64, or 66 at n = 3
    EXPECT_EQ(result->vocab_shard_columns(), vocab / n);
    EXPECT_EQ(result->largest_logits_columns(), vocab / n);
    const TensorCheck* logits = FindTensor(*result, "logits");
    ASSERT_NE(logits, nullptr);
    EXPECT_EQ(logits->shape(2), vocab / n);
  }
}

TEST_P(VocabParallelCeCheck, PerturbedLossFailsNamingIt) {
  ExpectPerturbationIsNamed(RunVocabParallelCeCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "loss");
}

TEST_P(VocabParallelCeCheck, PerturbedEmbeddingGradientShardFailsNamingIt) {
  ExpectPerturbationIsNamed(RunVocabParallelCeCheck, GetParam(),
                            DefaultOptionsFor(GetParam()), "grad_wte");
}

INSTANTIATE_TEST_SUITE_P(Ranks, VocabParallelCeCheck,
                         ::testing::Values(1, 2, 3, 4),
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
