#include "common/nn/moe.h"

#include <cmath>

#include "ATen/ATen.h"
#include "common/libtorch/allclose.h"
#include "gtest/gtest.h"

namespace mtb {
namespace nn {
namespace {

at::Tensor Experts(std::vector<int64_t> values, int64_t k) {
  return at::tensor(values, at::kLong).reshape({-1, k});
}
at::Tensor Scores(std::vector<float> values, int64_t k) {
  return at::tensor(values, at::kFloat).reshape({-1, k});
}
std::vector<bool> Flat(const at::Tensor& kept) {
  std::vector<bool> out;
  const at::Tensor flat = kept.reshape({-1}).contiguous();
  for (int64_t i = 0; i < flat.numel(); ++i) out.push_back(flat[i].item<bool>());
  return out;
}

TEST(ExpertCapacity, IsTheCeilingOfTheMegatronPerRankForm) {
  EXPECT_EQ(ExpertCapacity(1.0, 4, 1, 2), 2);     // 4 * 1 / 2
  EXPECT_EQ(ExpertCapacity(1.25, 10, 2, 4), 7);   // ceil(6.25)
  EXPECT_EQ(ExpertCapacity(0.01, 3, 1, 8), 1);    // ceil(0.00375)
  EXPECT_EQ(ExpertCapacity(2.0, 16, 2, 8), 8);    // exactly 8
}

TEST(ExpertCapacity, IsExactOnTheDecimalFactorAndBoundedByEveryAssignment) {
  // 1.1 * 50 / 5 is 11 exactly; in doubles 1.1 * 50 / 5 = 11.000000000000002,
  // whose ceiling is 12.
  EXPECT_EQ(ExpertCapacity(1.1, 25, 2, 5), 11);
  EXPECT_EQ(ExpertCapacity(1.1, 90, 1, 9), 11);
  // A factor no expert count can use keeps every assignment (tokens x k),
  // never an overflowed or negative capacity.
  EXPECT_EQ(ExpertCapacity(1e30, 16, 2, 8), 32);
  EXPECT_EQ(ExpertCapacity(8.0, 16, 2, 8), 32);
  EXPECT_EQ(ExpertCapacity(7.99, 16, 2, 8), 32);  // ceil(31.96)
  EXPECT_EQ(ExpertCapacity(1e-30, 16, 2, 8), 1);
  EXPECT_EQ(ExpertCapacity(1.25, 0, 2, 8), 0);
}

TEST(KeepWithinCapacity, DropsTheLowestScoresAndBreaksTiesByTokenIndex) {
  // Capacity 2. Expert 0 receives tokens 0 (0.6), 1 (0.9) and 2 (0.6): it
  // keeps token 1 (highest) and token 0 (ties with token 2, lower index);
  // token 2 is dropped. Expert 1 receives only token 3.
  const at::Tensor kept = KeepWithinCapacity(
      Experts({0, 0, 0, 1}, 1), Scores({0.6f, 0.9f, 0.6f, 0.7f}, 1),
      /*num_experts=*/2, /*capacity=*/2);
  EXPECT_EQ(Flat(kept), (std::vector<bool>{true, true, false, true}));
}

TEST(KeepWithinCapacity, TopTwoAssignmentsCompeteByScoreAcrossSlots) {
  // k = 2, capacity 1 per expert. Expert 2 is token 0's second choice (0.3)
  // and token 1's first (0.5): token 1 wins. Expert 0 is token 0's first
  // (0.7); expert 1 token 1's second (0.4). Only token 0 slot 1 is dropped.
  const at::Tensor kept =
      KeepWithinCapacity(Experts({0, 2, 2, 1}, 2),
                         Scores({0.7f, 0.3f, 0.5f, 0.4f}, 2), 3, 1);
  EXPECT_EQ(Flat(kept), (std::vector<bool>{true, false, true, true}));
}

TEST(KeepWithinCapacity, CapacityZeroDropsEverythingAndLargeKeepsAll) {
  const at::Tensor experts = Experts({1, 1, 0}, 1);
  const at::Tensor scores = Scores({0.5f, 0.6f, 0.9f}, 1);
  EXPECT_EQ(Flat(KeepWithinCapacity(experts, scores, 2, 0)),
            (std::vector<bool>{false, false, false}));
  EXPECT_EQ(Flat(KeepWithinCapacity(experts, scores, 2, 3)),
            (std::vector<bool>{true, true, true}));
}

TEST(LoadBalancingLoss, EqualsItsFormulaOnAHandExample) {
  // T = 4, k = 1, E = 2: f = (3/4, 1/4), P = (2.4/4, 1.6/4) = (0.6, 0.4);
  // aux = 2 * (0.75 * 0.6 + 0.25 * 0.4) = 1.1.
  const at::Tensor aux = LoadBalancingLoss(at::tensor({3.0f, 1.0f}),
                                           at::tensor({2.4f, 1.6f}), 4, 1);
  EXPECT_NEAR(aux.item<double>(), 1.1, 1e-6);
  // A perfectly balanced router gives exactly 1.
  EXPECT_NEAR(LoadBalancingLoss(at::tensor({2.0f, 2.0f}),
                                at::tensor({2.0f, 2.0f}), 4, 1)
                  .item<double>(),
              1.0, 1e-7);
}

TEST(RouterStatistics, HandRoutingGivesTheClosedFormAuxAndZLosses) {
  // The router is the identity, so x are the logits: token 0 (0, 0) ->
  // probs (1/2, 1/2), top-1 expert 0 (ties keep the lower index); token 1
  // (ln 3, 0) -> probs (3/4, 1/4), expert 0.
  const at::Tensor x =
      at::tensor({0.0f, 0.0f, static_cast<float>(std::log(3.0)), 0.0f})
          .reshape({2, 2});
  const Routing routing = Route(x, at::eye(2), at::Tensor(), 1);
  EXPECT_EQ(routing.experts.reshape({-1})[0].item<int64_t>(), 0);
  EXPECT_EQ(routing.experts.reshape({-1})[1].item<int64_t>(), 0);
  EXPECT_TRUE(at::equal(routing.gates, at::ones({2, 1})));
  const RouterSums sums = SumRouterStatistics(routing, 2);
  EXPECT_TRUE(at::equal(sums.counts, at::tensor({2.0f, 0.0f})));
  // aux = 2 * (2/2 * 1.25/2 + 0) = 1.25.
  EXPECT_NEAR(LoadBalancingLoss(sums.counts, sums.prob_sums, 2, 1).item<double>(),
              1.25, 1e-6);
  // logsumexp: ln 2 and ln 4 = 2 ln 2; z = (ln2^2 + 4 ln2^2) / 2.
  const double ln2 = std::log(2.0);
  EXPECT_NEAR(RouterZLoss(sums.lse_square_sum, 2).item<double>(),
              2.5 * ln2 * ln2, 1e-6);
}

TEST(Route, TopTwoGatesAreRenormalisedOverTheChosenExperts) {
  // probs (0.5, 0.3, 0.2): the top two renormalise to (0.625, 0.375).
  const at::Tensor logits =
      at::log(at::tensor({0.5f, 0.3f, 0.2f})).reshape({1, 3});
  const Routing routing = Route(logits, at::eye(3), at::Tensor(), 2);
  EXPECT_EQ(routing.experts[0][0].item<int64_t>(), 0);
  EXPECT_EQ(routing.experts[0][1].item<int64_t>(), 1);
  const AllCloseResult close =
      AllClose(routing.gates, at::tensor({0.625f, 0.375f}).reshape({1, 2}));
  EXPECT_TRUE(close.ok) << close.message;
}

TEST(ReferenceMoe, DroppedTokensContributeZeroAndKeptOnesTheirGatedExpert) {
  // Two experts, one token per source, capacity 1 each: with E = 2, k = 1,
  // cf = 1 and 2 local tokens per source, capacity = 1. Both tokens of
  // source 0 pick expert 0 (bias), so its lower-probability token is dropped.
  at::Generator generator = at::detail::createCPUGenerator(7);
  MoeParams params;
  params.router_weight = at::zeros({2, 3});
  params.router_bias = at::tensor({1.0f, 0.0f});
  params.fc_weight = at::normal(0, 1, {2, 4, 3}, generator);
  params.fc_bias = at::normal(0, 1, {2, 4}, generator);
  params.proj_weight = at::normal(0, 1, {2, 3, 4}, generator);
  params.proj_bias = at::normal(0, 1, {2, 3}, generator);
  const at::Tensor x = at::normal(0, 1, {2, 3}, generator);
  const MoeOutput out = ReferenceMoe(params, x, 1, 1.0, /*sources=*/1);
  // Equal scores: token 0 kept (lower index), token 1 dropped.
  EXPECT_EQ(Flat(out.kept), (std::vector<bool>{true, false}));
  EXPECT_TRUE(at::equal(out.out[1], at::zeros({3})));
  const AllCloseResult close =
      AllClose(out.out[0], ExpertForward(params, 0, x.slice(0, 0, 1))[0]);
  EXPECT_TRUE(close.ok) << close.message;
}

}  // namespace
}  // namespace nn
}  // namespace mtb
