#include "common/equivalence/equivalence.h"

#include <map>
#include <vector>

#include "ATen/ATen.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"

namespace mtb::equivalence {
namespace {

using collective::CollectiveOp;

// Two checks' words, as a caller such as tp_check's CheckKey gives them.
constexpr uint64_t kOneCheck = 3;
constexpr uint64_t kOtherCheck = 4;

TEST(SeededTensors, SameSeedAndCheckGiveTheSameTensorsInOrder) {
  SeededTensors a(7, kOneCheck), b(7, kOneCheck);
  const at::Tensor a0 = a.Normal({4, 4}, 1.0), a1 = a.Normal({4, 4}, 1.0);
  EXPECT_TRUE(at::equal(a0, b.Normal({4, 4}, 1.0)));
  EXPECT_TRUE(at::equal(a1, b.Normal({4, 4}, 1.0)));
  EXPECT_FALSE(at::equal(a0, a1));
}

TEST(SeededTensors, OtherChecksAndSeedsDrawOtherTensors) {
  const at::Tensor one = SeededTensors(7, kOneCheck).Normal({16}, 1.0);
  EXPECT_FALSE(
      at::equal(one, SeededTensors(7, kOtherCheck).Normal({16}, 1.0)));
  EXPECT_FALSE(
      at::equal(one, SeededTensors(8, kOneCheck).Normal({16}, 1.0)));
}

TEST(SeededTensors, NormalHasTheRequestedMeanAndTokensStayInTheVocabulary) {
  SeededTensors seeded(1, kOneCheck);
  const at::Tensor x = seeded.Normal({4096}, 0.1, /*mean=*/1.0);
  EXPECT_NEAR(x.mean().item<double>(), 1.0, 0.01);
  EXPECT_NEAR(x.std().item<double>(), 0.1, 0.01);
  const at::Tensor tokens = seeded.Tokens({64, 8}, 5);
  EXPECT_EQ(tokens.scalar_type(), at::kLong);
  EXPECT_EQ(tokens.min().item<int64_t>(), 0);
  EXPECT_EQ(tokens.max().item<int64_t>(), 4);
}

TEST(ShardQkv, TakesTheRanksBlockOfQueriesKeysAndValues) {
  ASSERT_TRUE(collective::RunRanksAsThreads(2, [](collective::Communicator& comm) {
                const at::Tensor qkv = at::arange(12, at::kFloat);  // D = 4
                const at::Tensor expected =
                    comm.rank() == 0
                        ? at::tensor({0.f, 1.f, 4.f, 5.f, 8.f, 9.f})
                        : at::tensor({2.f, 3.f, 6.f, 7.f, 10.f, 11.f});
                EXPECT_TRUE(at::equal(ShardQkv(qkv, comm), expected));
              }).ok());
}

TEST(CompareCollectives, MatchingCountsAndBytesAreOk) {
  const std::map<CollectiveCounter::Key, CollectiveCounter::Count> measured = {
      {{kForward, CollectiveOp::kAllReduce}, {2, 100, 100}}};
  const std::vector<CollectiveCheck> rows = CompareCollectives(
      measured, {{kForward, CollectiveOp::kAllReduce, 1, 60},
                 {kForward, CollectiveOp::kAllReduce, 1, 40}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op(), "all_reduce");
  EXPECT_EQ(rows[0].expected_count(), 2);
  EXPECT_EQ(rows[0].expected_bytes(), 100);
  EXPECT_TRUE(rows[0].ok());
}

TEST(CompareCollectives, MissingOrUnexpectedCollectivesAreNotOk) {
  const std::map<CollectiveCounter::Key, CollectiveCounter::Count> measured = {
      {{kBackward, CollectiveOp::kAllGather}, {1, 8, 8}}};
  const std::vector<CollectiveCheck> rows = CompareCollectives(
      measured, {{kForward, CollectiveOp::kAllReduce, 1, 60}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].phase(), kForward);
  EXPECT_EQ(rows[0].count(), 0);
  EXPECT_FALSE(rows[0].ok());
  EXPECT_EQ(rows[1].phase(), kBackward);
  EXPECT_EQ(rows[1].op(), "all_gather");
  EXPECT_EQ(rows[1].expected_count(), 0);
  EXPECT_FALSE(rows[1].ok());
}

TEST(CheckRecorder, OneRanksMismatchFailsEveryRanksVerdictNamingTheRank) {
  const Tolerance tolerance;
  const CheckHooks hooks;
  ASSERT_TRUE(collective::RunRanksAsThreads(3, [&](collective::Communicator& comm) {
                CheckRecorder recorder(
                    "test",
                    {{"a", TensorKind::kOutput}, {"b", TensorKind::kGrad}},
                    tolerance, hooks, comm);
                recorder.StartCounting();
                recorder.EndPhase(kForward);
                const at::Tensor x = at::ones({3});
                recorder.Compare("a", x, x);
                recorder.Compare("b", comm.rank() == 1 ? x * 2 : x, x);
                absl::StatusOr<CheckResult> result = recorder.Finish({});
                ASSERT_TRUE(result.ok()) << result.status();
                EXPECT_FALSE(result->pass());
                EXPECT_TRUE(result->tensors(0).ok());
                const TensorCheck& b = result->tensors(1);
                EXPECT_FALSE(b.ok());
                EXPECT_EQ(b.kind(), "grad");
                EXPECT_EQ(b.mismatched(), 3);
                EXPECT_EQ(b.max_abs_error(), 1.0);
                ASSERT_EQ(b.failed_ranks_size(), 1);
                EXPECT_EQ(b.failed_ranks(0), 1);
                EXPECT_NE(b.message().find("rank 1: "), std::string::npos)
                    << b.message();
              }).ok());
}

TEST(CheckRecorder, CountsOnlyBetweenStartAndTheLastPhase) {
  const Tolerance tolerance;
  const CheckHooks hooks;
  ASSERT_TRUE(collective::RunRanksAsThreads(2, [&](collective::Communicator& comm) {
                const at::Tensor t = at::ones({4});
                ASSERT_TRUE(comm.AllReduce(t).ok());  // before: not counted
                CheckRecorder recorder("test", {{"a", TensorKind::kOutput}},
                                       tolerance, hooks, comm);
                recorder.StartCounting();
                ASSERT_TRUE(comm.AllReduce(t).ok());
                recorder.EndPhase(kForward);
                ASSERT_TRUE(comm.AllReduce(t).ok());
                ASSERT_TRUE(comm.AllReduce(t).ok());
                recorder.EndPhase(kBackward);
                ASSERT_TRUE(comm.AllReduce(t).ok());  // after: not counted
                recorder.Compare("a", t, t);
                // 16 bytes, 2(n-1)/n of it per rank = 16.
                absl::StatusOr<CheckResult> result = recorder.Finish(
                    {{kForward, CollectiveOp::kAllReduce, 1, 16},
                     {kBackward, CollectiveOp::kAllReduce, 2, 32}});
                ASSERT_TRUE(result.ok()) << result.status();
                EXPECT_TRUE(result->pass());
                ASSERT_EQ(result->collectives_size(), 2);
                EXPECT_EQ(result->collectives(1).count(), 2);
                EXPECT_EQ(result->collectives(1).bytes_sent(), 32);
              }).ok());
}

TEST(CheckRecorder, PerturbAddsTheDeltaToTheFirstElementOnTheNamedRankOnly) {
  const Tolerance tolerance;
  CheckHooks hooks;
  hooks.perturb_rank = 1;
  hooks.perturb_tensor = "a";
  ASSERT_TRUE(collective::RunRanksAsThreads(2, [&](collective::Communicator& comm) {
                CheckRecorder recorder(
                    "test",
                    {{"a", TensorKind::kOutput}, {"b", TensorKind::kOutput}},
                    tolerance, hooks, comm);
                const at::Tensor x = at::zeros({2, 2});
                const at::Tensor a = recorder.Perturb("a", x);
                EXPECT_TRUE(recorder.Perturb("b", x).is_same(x));
                if (comm.rank() == 1) {
                  EXPECT_FLOAT_EQ(a[0][0].item<float>(), 1e-3f);
                  EXPECT_EQ(a.sum().item<float>(), a[0][0].item<float>());
                } else {
                  EXPECT_TRUE(a.is_same(x));
                }
              }).ok());
}

}  // namespace
}  // namespace mtb::equivalence
