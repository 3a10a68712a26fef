#include "common/nn/layers.h"

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "ATen/ATen.h"
#include "common/libtorch/allclose.h"
#include "common/nn/attention.h"
#include "common/nn/autocast.h"
#include "gtest/gtest.h"

namespace mtb {
namespace nn {
namespace {

// Inputs come from a generator seeded per test, never the global one.
at::Tensor Randn(at::IntArrayRef shape, at::Generator& generator) {
  return at::normal(0.0, 1.0, shape, generator);
}

AttentionParams RandomAttention(int64_t d_model, at::Generator& generator) {
  AttentionParams params;
  params.qkv_weight = Randn({3 * d_model, d_model}, generator) * 0.2;
  params.qkv_bias = Randn({3 * d_model}, generator) * 0.1;
  params.proj_weight = Randn({d_model, d_model}, generator) * 0.2;
  params.proj_bias = Randn({d_model}, generator) * 0.1;
  return params;
}

TEST(LayerNorm, MatchesTheDefinition) {
  at::Generator generator = at::detail::createCPUGenerator(1);
  const at::Tensor x = Randn({2, 5, 8}, generator);
  const at::Tensor weight = Randn({8}, generator);
  const at::Tensor bias = Randn({8}, generator);
  const at::Tensor mean = x.mean(-1, true);
  const at::Tensor var = (x - mean).pow(2).mean(-1, true);
  const at::Tensor expected = (x - mean) / (var + 1e-5).sqrt() * weight + bias;
  const AllCloseResult result = AllClose(LayerNorm(x, weight, bias), expected);
  EXPECT_TRUE(result.ok) << result.message;
}

TEST(LayerNorm, AcceptsBf16InputUnderAutocastAndReturnsBf16) {
  at::Generator generator = at::detail::createCPUGenerator(2);
  const at::Tensor x = Randn({3, 8}, generator).to(at::kBFloat16);
  const at::Tensor weight = at::ones({8});
  const at::Tensor bias = at::zeros({8});
  AutocastGuard autocast(true);
  const at::Tensor y = LayerNorm(x, weight, bias);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(y.isfinite().all().item<bool>());
}

TEST(Mlp, IsLinearGeluLinear) {
  at::Generator generator = at::detail::createCPUGenerator(3);
  MlpParams params{Randn({16, 4}, generator), Randn({16}, generator),
                   Randn({4, 16}, generator), Randn({4}, generator)};
  const at::Tensor x = Randn({2, 3, 4}, generator);
  const at::Tensor hidden = x.matmul(params.fc_weight.t()) + params.fc_bias;
  const at::Tensor gelu = 0.5 * hidden * (1 + at::erf(hidden / std::sqrt(2.0)));
  const at::Tensor expected =
      gelu.matmul(params.proj_weight.t()) + params.proj_bias;
  const AllCloseResult result = AllClose(Mlp(params, x), expected);
  EXPECT_TRUE(result.ok) << result.message;
}

TEST(CrossEntropy, UniformLogitsGiveLogVocab) {
  const at::Tensor logits = at::zeros({2, 3, 50});
  const at::Tensor targets = at::zeros({2, 3}, at::kLong);
  EXPECT_NEAR(CrossEntropy(logits, targets).item<double>(), std::log(50.0),
              1e-6);
}

TEST(CausalSelfAttention, MatchesPerHeadLoopOverEarlierPositions) {
  at::Generator generator = at::detail::createCPUGenerator(4);
  const int64_t d_model = 8, n_heads = 2, head_dim = 4, seq_len = 5;
  const AttentionParams params = RandomAttention(d_model, generator);
  const at::Tensor x = Randn({1, seq_len, d_model}, generator);
  const at::Tensor qkv = x[0].matmul(params.qkv_weight.t()) + params.qkv_bias;
  at::Tensor context = at::zeros({seq_len, d_model});
  for (int64_t h = 0; h < n_heads; ++h) {
    const at::Tensor q = qkv.slice(1, h * head_dim, (h + 1) * head_dim);
    const at::Tensor k =
        qkv.slice(1, d_model + h * head_dim, d_model + (h + 1) * head_dim);
    const at::Tensor v = qkv.slice(1, 2 * d_model + h * head_dim,
                                   2 * d_model + (h + 1) * head_dim);
    for (int64_t t = 0; t < seq_len; ++t) {
      const at::Tensor scores =
          k.slice(0, 0, t + 1).matmul(q[t]) / std::sqrt(4.0);  // (t+1)
      const at::Tensor weights = scores.softmax(0);
      context[t].slice(0, h * head_dim, (h + 1) * head_dim) =
          weights.matmul(v.slice(0, 0, t + 1));
    }
  }
  const at::Tensor expected =
      context.matmul(params.proj_weight.t()) + params.proj_bias;
  const at::Tensor actual =
      CausalSelfAttention(params, x, n_heads, CounterDropout{}, 0)[0];
  const AllCloseResult result = AllClose(actual, expected);
  EXPECT_TRUE(result.ok) << result.message;
}

TEST(CausalSelfAttention, LaterTokensLeaveEarlierOutputsBitIdentical) {
  at::Generator generator = at::detail::createCPUGenerator(5);
  const AttentionParams params = RandomAttention(16, generator);
  const at::Tensor x = Randn({2, 8, 16}, generator);
  at::Tensor changed = x.clone();
  changed.slice(1, 5, 8).normal_(0, 1, generator);
  CounterDropout dropout{0.3, 1, 1, {0, 1}};
  const at::Tensor before = CausalSelfAttention(params, x, 4, dropout, 0);
  const at::Tensor after = CausalSelfAttention(params, changed, 4, dropout, 0);
  EXPECT_TRUE(at::equal(before.slice(1, 0, 5), after.slice(1, 0, 5)));
  EXPECT_FALSE(at::equal(before.slice(1, 5, 8), after.slice(1, 5, 8)));
}

// The whole layer's output as the sum of `shards` head shards' partial sums
// (Megatron's split: shard s holds heads [s*H/shards, (s+1)*H/shards) of each
// of Q, K and V and those columns of the output projection), plus the bias.
// Shard s says its first head is first_head(s).
at::Tensor SumOfHeadShards(const AttentionParams& params, const at::Tensor& x,
                           int64_t n_heads, int64_t shards,
                           const CounterDropout& dropout,
                           const std::function<int64_t(int64_t)>& first_head) {
  const int64_t d_model = x.size(2);
  const int64_t width = d_model / shards;
  at::Tensor sum = params.proj_bias.expand(x.sizes()).clone();
  for (int64_t s = 0; s < shards; ++s) {
    AttentionParams shard;
    std::vector<at::Tensor> rows, biases;
    for (int64_t part = 0; part < 3; ++part) {  // q, k, v
      rows.push_back(params.qkv_weight.slice(0, part * d_model + s * width,
                                             part * d_model + (s + 1) * width));
      biases.push_back(params.qkv_bias.slice(0, part * d_model + s * width,
                                             part * d_model + (s + 1) * width));
    }
    shard.qkv_weight = at::cat(rows);
    shard.qkv_bias = at::cat(biases);
    shard.proj_weight = params.proj_weight.slice(1, s * width, (s + 1) * width);
    sum += CausalSelfAttention(shard, x, n_heads / shards, dropout, 0,
                               first_head(s));
  }
  return sum;
}

TEST(CausalSelfAttention, HeadShardsSumToTheWholeLayer) {
  at::Generator generator = at::detail::createCPUGenerator(6);
  const int64_t d_model = 8, n_heads = 4, shards = 2;  // 2 heads of 2 per shard
  const AttentionParams params = RandomAttention(d_model, generator);
  const at::Tensor x = Randn({2, 5, d_model}, generator);
  const at::Tensor sum = SumOfHeadShards(
      params, x, n_heads, shards, CounterDropout{},
      [&](int64_t s) { return s * n_heads / shards; });
  const AllCloseResult result =
      AllClose(sum, CausalSelfAttention(params, x, n_heads, CounterDropout{}, 0));
  EXPECT_TRUE(result.ok) << result.message;
}

// Dropout on head shards (tensor parallelism): each shard drops its heads'
// probabilities with its part of the whole sample's mask, so the shards draw
// distinct masks and sum to the whole layer with dropout. Shards that all
// drew the first heads' mask (one stream shared across the group) do not.
TEST(CausalSelfAttention, HeadShardsWithDropoutSumToTheWholeLayer) {
  at::Generator generator = at::detail::createCPUGenerator(7);
  const int64_t d_model = 16, n_heads = 4, shards = 2, seq_len = 6;
  const AttentionParams params = RandomAttention(d_model, generator);
  const at::Tensor x = Randn({2, seq_len, d_model}, generator);
  const CounterDropout dropout{0.3, 4, 2, {3, 8}};
  const at::Tensor whole = CausalSelfAttention(params, x, n_heads, dropout, 0);
  ASSERT_FALSE(AllClose(whole, CausalSelfAttention(params, x, n_heads,
                                                   CounterDropout{}, 0))
                   .ok);  // the dropout bites
  const AllCloseResult own_parts =
      AllClose(SumOfHeadShards(params, x, n_heads, shards, dropout,
                               [&](int64_t s) { return s * n_heads / shards; }),
               whole);
  EXPECT_TRUE(own_parts.ok) << own_parts.message;
  EXPECT_FALSE(AllClose(SumOfHeadShards(params, x, n_heads, shards, dropout,
                                        [](int64_t) { return int64_t{0}; }),
                        whole)
                   .ok)
      << "shards sharing one mask stream matched the whole layer";
}

}  // namespace
}  // namespace nn
}  // namespace mtb
