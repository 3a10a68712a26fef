#include "trainer/model/model.h"

#include <cmath>
#include <set>
#include <vector>

#include "ATen/ATen.h"
#include "common/libtorch/allclose.h"
#include "common/nn/autocast.h"
#include "common/nn/layers.h"
#include "gtest/gtest.h"
#include "torch/csrc/autograd/autograd.h"
#include "trainer/data/data.h"

namespace mtb {
namespace {

ModelShape Tiny() { return ModelShape{64, 32, 2, 4, 16}; }

ForwardOptions WithDropout(double p, int64_t batch) {
  ForwardOptions options;
  options.dropout.p = p;
  options.dropout.seed = 5;
  options.dropout.step = 1;
  for (int64_t i = 0; i < batch; ++i) options.dropout.sample_indices.push_back(i);
  return options;
}

TEST(GptModel, FirstLossOnUniformTokensIsLogVocab) {
  const ModelShape shape{256, 64, 2, 4, 32};
  const GptModel model(shape, 1);
  const Batch batch = TensorData(MakeSyntheticSamples(1, 256, 32))->Get(1, 0, 8);
  const double loss =
      nn::CrossEntropy(model.Forward(batch.inputs, ForwardOptions{}),
                       batch.targets)
          .item<double>();
  EXPECT_NEAR(loss, std::log(256.0), 0.1);
}

TEST(GptModel, ChangingTokenTPlusOneLeavesEarlierLogitsBitIdentical) {
  const GptModel model(Tiny(), 2);
  const Batch batch = TensorData(MakeSyntheticSamples(2, 64, 16))->Get(1, 0, 3);
  for (int64_t t : {0, 6, 14}) {
    at::Tensor changed = batch.inputs.clone();
    changed.select(1, t + 1).add_(1).remainder_(64);
    const ForwardOptions options = WithDropout(0.2, 3);
    const at::Tensor before = model.Forward(batch.inputs, options);
    const at::Tensor after = model.Forward(changed, options);
    EXPECT_TRUE(at::equal(before.slice(1, 0, t + 1), after.slice(1, 0, t + 1)))
        << "t = " << t;
    EXPECT_FALSE(at::equal(before.select(1, t + 1), after.select(1, t + 1)));
  }
}

TEST(GptModel, ParameterCountMatchesTheClosedForm) {
  const ModelShape s = Tiny();
  const GptModel model(s, 1);
  const int64_t d = s.d_model;
  const int64_t expected = s.n_layers * (12 * d * d + 13 * d) +
                           s.vocab_size * d + s.seq_len * d + 2 * d;
  EXPECT_EQ(model.ParameterCount(), expected);
  EXPECT_EQ(model.FlopsParameterCount(), expected - s.seq_len * d);
  EXPECT_DOUBLE_EQ(model.FlopsPerToken(),
                   6.0 * (expected - s.seq_len * d) +
                       12.0 * s.n_layers * s.seq_len * d);
}

TEST(GptModel, OnlyLinearWeightsDecay) {
  const GptModel model(Tiny(), 1);
  std::set<std::string> decayed;
  std::set<std::string> names;
  for (const NamedParameter& p : model.parameters()) {
    names.insert(p.name);
    if (p.weight_decay) decayed.insert(p.name);
    EXPECT_TRUE(p.tensor.requires_grad()) << p.name;
    EXPECT_EQ(p.tensor.scalar_type(), at::kFloat) << p.name;
  }
  EXPECT_EQ(names.size(), model.parameters().size());
  EXPECT_EQ(model.parameters().front().name, "wte");
  EXPECT_EQ(model.parameters().back().name, "ln_f.bias");
  EXPECT_EQ(decayed, (std::set<std::string>{
                         "h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
                         "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.weight",
                         "h.1.attn.c_attn.weight", "h.1.attn.c_proj.weight",
                         "h.1.mlp.c_fc.weight", "h.1.mlp.c_proj.weight"}));
}

TEST(GptModel, InitialisationIsGpt2sAndDeterministic) {
  const ModelShape shape{256, 128, 4, 4, 64};
  const GptModel model(shape, 3);
  const GptModel again(shape, 3);
  const GptModel other(shape, 4);
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    const NamedParameter& p = model.parameters()[i];
    EXPECT_TRUE(at::equal(p.tensor, again.parameters()[i].tensor)) << p.name;
    const double std = p.tensor.std().item<double>();
    const double mean = p.tensor.mean().item<double>();
    if (p.name.find("c_proj.weight") != std::string::npos) {
      EXPECT_NEAR(std, 0.02 / std::sqrt(8.0), 0.0005) << p.name;
    } else if (p.name.find("weight") != std::string::npos &&
               p.name.find("ln_") != std::string::npos) {
      EXPECT_TRUE(at::equal(p.tensor, at::ones_like(p.tensor))) << p.name;
    } else if (p.name.find("bias") != std::string::npos) {
      EXPECT_TRUE(at::equal(p.tensor, at::zeros_like(p.tensor))) << p.name;
    } else {
      EXPECT_NEAR(std, 0.02, 0.0005) << p.name;
      EXPECT_NEAR(mean, 0.0, 0.001) << p.name;
      EXPECT_FALSE(at::equal(p.tensor, other.parameters()[i].tensor));
    }
  }
}

// Loss and every parameter's gradient (in parameters() order).
std::vector<at::Tensor> LossAndGrads(const GptModel& model, const Batch& batch,
                                     ForwardOptions options, bool bf16) {
  at::Tensor loss;
  {
    nn::AutocastGuard autocast(bf16);
    loss = nn::CrossEntropy(model.Forward(batch.inputs, options), batch.targets);
  }
  std::vector<at::Tensor> inputs;
  for (const NamedParameter& p : model.parameters()) inputs.push_back(p.tensor);
  std::vector<at::Tensor> result = {loss.detach()};
  for (const at::Tensor& g : torch::autograd::grad({loss}, inputs)) {
    result.push_back(g);
  }
  return result;
}

TEST(GptModel, ActivationCheckpointingGivesIdenticalLossAndGradients) {
  const GptModel model(Tiny(), 6);
  const Batch batch = TensorData(MakeSyntheticSamples(6, 64, 16))->Get(1, 0, 4);
  for (bool bf16 : {false, true}) {
    ForwardOptions options = WithDropout(0.3, 4);
    const auto plain = LossAndGrads(model, batch, options, bf16);
    options.activation_checkpointing = true;
    const auto checkpointed = LossAndGrads(model, batch, options, bf16);
    ASSERT_EQ(plain.size(), checkpointed.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_TRUE(at::equal(plain[i], checkpointed[i]))
          << (i == 0 ? "loss" : model.parameters()[i - 1].name)
          << (bf16 ? " (bf16)" : " (fp32)");
    }
  }
}

TEST(GptModel, DropoutChangesTheLossAndZeroDropoutDoesNot) {
  const GptModel model(Tiny(), 6);
  const Batch batch = TensorData(MakeSyntheticSamples(6, 64, 16))->Get(1, 0, 4);
  auto loss = [&](double p) {
    return nn::CrossEntropy(model.Forward(batch.inputs, WithDropout(p, 4)),
                            batch.targets)
        .item<double>();
  };
  EXPECT_EQ(loss(0.0),
            nn::CrossEntropy(model.Forward(batch.inputs, ForwardOptions{}),
                             batch.targets)
                .item<double>());
  EXPECT_NE(loss(0.3), loss(0.0));
  EXPECT_EQ(loss(0.3), loss(0.3));
}

TEST(GptModel, Bf16ForwardRunsUnderAutocastAndStaysFinite) {
  const GptModel model(Tiny(), 8);
  const Batch batch = TensorData(MakeSyntheticSamples(8, 64, 16))->Get(1, 0, 4);
  nn::AutocastGuard autocast(true);
  const at::Tensor logits = model.Forward(batch.inputs, WithDropout(0.1, 4));
  EXPECT_EQ(logits.scalar_type(), at::kBFloat16);
  const at::Tensor loss = nn::CrossEntropy(logits, batch.targets);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  EXPECT_NEAR(loss.item<double>(), std::log(64.0), 0.1);
}

}  // namespace
}  // namespace mtb
