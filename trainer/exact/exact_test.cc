// The exact reduction's pieces on one rank (no communicator): the global
// chunk order, the grid and its overflow, order-independent accumulation and
// a norm that does not depend on how the reduction is cut. The multi-rank
// equivalence is exact_process_test.
#include "trainer/exact/exact.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ATen/ATen.h"
#include "gtest/gtest.h"
#include "trainer/exact/exact_quantize.h"
#include "trainer/model/parameter_store.h"

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

// The one-pass kernel gives LibTorch's abs().max() and
// double().mul_(scale).round_().to(int64) bit for bit: ties to even (0.5,
// 1.5, 2.5 on the grid), negatives, signed zero, a length that is not a
// multiple of its block, and adds onto what the accumulator held.
TEST(QuantizeAndAccumulate, MatchesLibTorchsPassesBitForBit) {
  const int64_t count = 5000;
  // Deterministic values of both signs and many magnitudes.
  at::Tensor values = at::sin(at::arange(count, at::kFloat) * 0.37f) * 3;
  float* data = values.data_ptr<float>();
  data[0] = 0.5f / 1024;  // ties on the grid of 2^10
  data[1] = 1.5f / 1024;
  data[2] = -2.5f / 1024;
  data[3] = -0.0f;
  const double scale = std::ldexp(1.0, 10);
  at::Tensor before = at::arange(count, at::kLong) - 7;
  at::Tensor accumulator = before.clone();
  const QuantizeScan scan = QuantizeAndAccumulate(data, count, scale, 1e6,
                                                  accumulator.data_ptr<int64_t>());
  const at::Tensor expected =
      before + values.to(at::kDouble).mul_(scale).round_().to(at::kLong);
  EXPECT_TRUE(at::equal(accumulator, expected));
  EXPECT_EQ(accumulator[0].item<int64_t>(), -7 + 0);   // 0.5 -> 0
  EXPECT_EQ(accumulator[1].item<int64_t>(), -6 + 2);   // 1.5 -> 2
  EXPECT_EQ(accumulator[2].item<int64_t>(), -5 - 2);   // -2.5 -> -2
  EXPECT_TRUE(scan.finite);
  EXPECT_EQ(scan.max_abs, values.abs().max().item<float>());
}

// Values beyond the limit are left out (the step is redone) and still set
// the max-abs; NaN or infinity makes the scan not finite.
TEST(QuantizeAndAccumulate, BeyondTheLimitIsLeftOutAndNonFiniteIsReported) {
  std::vector<float> values(3000, 1.0f);
  values[2500] = 100.0f;
  std::vector<int64_t> accumulator(values.size(), 0);
  QuantizeScan scan = QuantizeAndAccumulate(values.data(), 3000, 4.0, 10.0, accumulator.data());
  EXPECT_TRUE(scan.finite);
  EXPECT_EQ(scan.max_abs, 100.0f);
  EXPECT_EQ(accumulator[2500], 0);
  EXPECT_EQ(accumulator[0], 4);
  EXPECT_EQ(accumulator[2999], 4);
  values[10] = std::nanf("");
  EXPECT_FALSE(QuantizeAndAccumulate(values.data(), 3000, 4.0, 1e9, accumulator.data()).finite);
  values[10] = INFINITY;
  EXPECT_FALSE(QuantizeAndAccumulate(values.data(), 3000, 4.0, 1e9, accumulator.data()).finite);
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
