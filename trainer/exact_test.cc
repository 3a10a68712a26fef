// The exact reduction's pieces on one rank (no communicator): the global
// chunk order, the grid and its overflow, order-independent accumulation and
// a norm that does not depend on how the reduction is cut. The multi-rank
// equivalence is exact_process_test.
#include "trainer/exact.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ATen/ATen.h"
#include "gtest/gtest.h"
#include "trainer/parameter_store.h"

namespace mtb {
namespace {

std::vector<NamedParameter> TwoParameters() {
  std::vector<NamedParameter> parameters;
  for (const char* name : {"a", "b"}) {
    NamedParameter p;
    p.name = name;
    p.tensor = at::zeros({6}, at::kFloat).set_requires_grad(true);
    parameters.push_back(p);
  }
  return parameters;
}

void SetGradients(ParameterStore& store, const at::Tensor& values) {
  at::NoGradGuard no_grad;
  store.flat_gradients().copy_(values);
}

ExactGroup Group(ParameterStore& store, int64_t offset, int64_t numel) {
  ExactGroup group;
  group.offset = offset;
  group.numel = numel;
  group.destination = store.flat_gradients().narrow(0, offset, numel);
  return group;
}

TEST(GlobalChunkOf, EveryLayoutCoversEveryChunkOnce) {
  // 16 samples in chunks of 4: 1 x 16, 2 x 8, 4 x 4, 2 x (4 x 2).
  struct Layout {
    int ranks, batch, accum;
  };
  for (const Layout& l : {Layout{1, 16, 1}, Layout{2, 8, 1}, Layout{4, 4, 1},
                          Layout{2, 4, 2}}) {
    std::vector<int64_t> chunks;
    for (int r = 0; r < l.ranks; ++r) {
      for (int i = 0; i < l.accum * l.batch / 4; ++i) {
        chunks.push_back(GlobalChunkOf(i, r, l.ranks, l.batch, 4));
      }
    }
    std::sort(chunks.begin(), chunks.end());
    EXPECT_EQ(chunks, (std::vector<int64_t>{0, 1, 2, 3})) << l.ranks;
  }
  // Rank 1 of 2, batch 4, second micro-batch: samples 12..15 = chunk 3.
  EXPECT_EQ(GlobalChunkOf(1, 1, 2, 4, 4), 3);
}

TEST(ExactReducer, ChunkOrderDoesNotChangeABitWhereFloatSumsDo) {
  ParameterStore store(TwoParameters());
  store.AttachGradients();
  // Three chunks whose fp32 sum depends on the order: 1 + 2^-24 rounds
  // back to 1 (a tie, to even), 2^-24 + 2^-24 does not.
  const float tiny = std::ldexp(1.0f, -24);
  const std::vector<at::Tensor> chunks = {
      at::full({12}, 1.0f), at::full({12}, tiny), at::full({12}, tiny)};
  auto reduce = [&](const std::vector<int>& order) {
    ExactReducer reducer(store, 3);
    reducer.BeginAttempt(false);
    for (int c : order) {
      SetGradients(store, chunks[c]);
      reducer.AddChunk();
      EXPECT_EQ(store.flat_gradients().abs().max().item<float>(), 0.0f);
    }
    const absl::StatusOr<ExactReducer::Verdict> verdict =
        reducer.Decide(nullptr);
    EXPECT_TRUE(verdict.ok() && verdict->finite &&
                verdict->overflowed.empty());
    EXPECT_TRUE(reducer.Reduce({Group(store, 0, 12)}, nullptr).ok());
    return store.flat_gradients().clone();
  };
  const at::Tensor forward = reduce({0, 1, 2});
  const at::Tensor backward = reduce({1, 2, 0});
  EXPECT_TRUE(at::equal(forward, backward));
  // The float sums differ in those orders (so the check above could fail).
  const volatile float one = 1.0f;
  EXPECT_NE((one + tiny) + tiny, (tiny + tiny) + one);
}

TEST(ExactReducer, AnOverflowIsFoundAndTheCoarserGridHoldsIt) {
  ParameterStore store(TwoParameters());
  store.AttachGradients();
  ExactReducer reducer(store, 1);
  at::Tensor values = at::full({12}, 0.5f);
  values[2] = 300.0f;  // beyond 2^8 on parameter a
  for (bool coarsen : {false, true}) {
    reducer.BeginAttempt(coarsen);
    SetGradients(store, values);
    reducer.AddChunk();
    const absl::StatusOr<ExactReducer::Verdict> verdict =
        reducer.Decide(nullptr);
    ASSERT_TRUE(verdict.ok());
    if (!coarsen) {
      EXPECT_EQ(verdict->overflowed, std::vector<int>{0});
      EXPECT_EQ(verdict->Describe(store, reducer.global_max_abs()),
                "a (max-abs 300)");
    } else {
      EXPECT_TRUE(verdict->overflowed.empty());
    }
  }
  EXPECT_LT(reducer.shift(0), reducer.shift(1));  // only a coarsened
  ASSERT_TRUE(reducer.Reduce({Group(store, 0, 12)}, nullptr).ok());
  EXPECT_TRUE(at::equal(store.flat_gradients(), values));
}

TEST(ExactReducer, ANonFiniteChunkIsReported) {
  ParameterStore store(TwoParameters());
  store.AttachGradients();
  ExactReducer reducer(store, 2);
  reducer.BeginAttempt(false);
  at::Tensor values = at::zeros({12});
  values[7] = std::nanf("");
  SetGradients(store, values);
  reducer.AddChunk();
  const absl::StatusOr<ExactReducer::Verdict> verdict = reducer.Decide(nullptr);
  ASSERT_TRUE(verdict.ok());
  EXPECT_FALSE(verdict->finite);
}

TEST(ExactReducer, TheNormDoesNotDependOnHowTheReductionIsCut) {
  ParameterStore store(TwoParameters());
  store.AttachGradients();
  const at::Tensor values =
      at::linspace(-0.37, 0.91, 12, at::kFloat).pow(3).mul(1.0f / 3);
  auto norm = [&](const std::vector<std::pair<int64_t, int64_t>>& cuts) {
    ExactReducer reducer(store, 1);
    reducer.BeginAttempt(false);
    SetGradients(store, values);
    reducer.AddChunk();
    EXPECT_TRUE(reducer.Decide(nullptr).ok());
    std::vector<ExactGroup> groups;
    for (const auto& [offset, numel] : cuts) {
      groups.push_back(Group(store, offset, numel));
    }
    EXPECT_TRUE(reducer.Reduce(groups, nullptr).ok());
    return reducer.Norm(groups, nullptr).value();
  };
  const double whole = norm({{0, 12}});
  EXPECT_EQ(whole, norm({{0, 5}, {5, 2}, {7, 5}}));
  EXPECT_EQ(whole, norm({{0, 1}, {1, 10}, {11, 1}}));
  EXPECT_NEAR(whole, values.to(at::kDouble).norm().item<double>(), 1e-12);
}

}  // namespace
}  // namespace mtb
