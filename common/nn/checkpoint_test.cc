#include "common/nn/checkpoint.h"

#include <vector>

#include "ATen/ATen.h"
#include "common/libtorch/allclose.h"
#include "common/nn/attention.h"
#include "common/nn/autocast.h"
#include "common/nn/dropout.h"
#include "common/nn/layers.h"
#include "gtest/gtest.h"
#include "torch/csrc/autograd/autograd.h"
#include "torch/csrc/autograd/function.h"

namespace mtb {
namespace nn {
namespace {

struct Block {
  AttentionParams attention;
  MlpParams mlp;
  at::Tensor ln_weight, ln_bias;

  std::vector<at::Tensor> Params() const {
    return {attention.qkv_weight, attention.qkv_bias, attention.proj_weight,
            attention.proj_bias,  mlp.fc_weight,      mlp.fc_bias,
            mlp.proj_weight,      mlp.proj_bias,      ln_weight,
            ln_bias};
  }
};

Block RandomBlock(int64_t d, at::Generator& generator) {
  auto param = [&](at::IntArrayRef shape) {
    return (at::normal(0.0, 0.2, shape, generator)).requires_grad_(true);
  };
  return Block{{param({3 * d, d}), param({3 * d}), param({d, d}), param({d})},
               {param({4 * d, d}), param({4 * d}), param({d, 4 * d}), param({d})},
               param({d}),
               param({d})};
}

// A pre-norm block with dropout at all three sites.
at::Tensor RunBlock(const Block& block, const at::Tensor& x,
                    const CounterDropout& dropout) {
  at::Tensor h = x + dropout.Apply(
                         CausalSelfAttention(block.attention,
                                             LayerNorm(x, block.ln_weight,
                                                       block.ln_bias),
                                             2, dropout, 0),
                         0, DropoutSite::kAttentionOutput);
  return h + dropout.Apply(
                 Mlp(block.mlp, LayerNorm(h, block.ln_weight, block.ln_bias)),
                 0, DropoutSite::kMlpOutput);
}

// Loss and gradients (x first, then the block's parameters).
std::vector<at::Tensor> LossAndGrads(const Block& block, const at::Tensor& x,
                                     bool checkpointed, bool bf16) {
  const CounterDropout dropout{0.25, 3, 7, {4, 9}};
  at::Tensor input = x.detach().requires_grad_(true);
  at::Tensor loss;
  {
    AutocastGuard autocast(bf16);
    at::Tensor out;
    if (checkpointed) {
      out = Checkpoint(
          [&](const at::Tensor& y) { return RunBlock(block, y, dropout); },
          input, block.Params());
    } else {
      out = RunBlock(block, input, dropout);
    }
    loss = out.to(at::kFloat).pow(2).mean();
  }
  std::vector<at::Tensor> inputs = {input};
  for (const at::Tensor& p : block.Params()) inputs.push_back(p);
  std::vector<at::Tensor> result = {loss.detach()};
  for (const at::Tensor& g : torch::autograd::grad({loss}, inputs)) {
    result.push_back(g);
  }
  return result;
}

TEST(Checkpoint, GivesTheSameLossAndGradientsWithDropout) {
  at::Generator generator = at::detail::createCPUGenerator(11);
  const Block block = RandomBlock(8, generator);
  const at::Tensor x = at::normal(0.0, 1.0, {2, 6, 8}, generator);
  const auto plain = LossAndGrads(block, x, /*checkpointed=*/false, false);
  const auto recomputed = LossAndGrads(block, x, /*checkpointed=*/true, false);
  ASSERT_EQ(plain.size(), recomputed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    // Recomputation repeats the same kernels on the same values.
    EXPECT_TRUE(at::equal(plain[i], recomputed[i])) << "tensor " << i;
  }
}

TEST(Checkpoint, RecomputesUnderTheForwardsBf16Autocast) {
  at::Generator generator = at::detail::createCPUGenerator(12);
  const Block block = RandomBlock(8, generator);
  const at::Tensor x = at::normal(0.0, 1.0, {2, 6, 8}, generator);
  const auto plain = LossAndGrads(block, x, false, /*bf16=*/true);
  const auto recomputed = LossAndGrads(block, x, true, /*bf16=*/true);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(at::equal(plain[i], recomputed[i])) << "tensor " << i;
    EXPECT_EQ(recomputed[i].scalar_type(), at::kFloat) << "tensor " << i;
  }
}

TEST(Checkpoint, ForwardKeepsNoActivationsOfTheBlock) {
  at::Generator generator = at::detail::createCPUGenerator(13);
  const Block block = RandomBlock(8, generator);
  const at::Tensor x =
      at::normal(0.0, 1.0, {2, 6, 8}, generator).requires_grad_(true);
  const at::Tensor out = Checkpoint(
      [&](const at::Tensor& y) { return RunBlock(block, y, CounterDropout{}); },
      x, block.Params());
  // One node: the checkpoint, whose next edges are x and the parameters.
  ASSERT_NE(out.grad_fn(), nullptr);
  EXPECT_EQ(out.grad_fn()->num_inputs(), 1u);
  EXPECT_EQ(out.grad_fn()->next_edges().size(), 1u + block.Params().size());
}

}  // namespace
}  // namespace nn
}  // namespace mtb
