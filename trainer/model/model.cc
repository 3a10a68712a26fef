#include "trainer/model/model.h"

#include <cmath>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/base/counter_rng.h"
#include "common/gemm/ops.h"
#include "common/nn/checkpoint.h"
#include "common/nn/init.h"
#include "glog/logging.h"

namespace mtb {
namespace {

constexpr double kInitStd = 0.02;

// A parameter filled from the counter-based normal stream of (seed, index).
at::Tensor NormalParameter(at::IntArrayRef shape, double stddev, uint64_t seed,
                           int64_t index) {
  return nn::CounterNormalTensor(
      shape,
      CounterKey({seed, static_cast<uint64_t>(RngStream::kInit),
                  static_cast<uint64_t>(index)}),
      stddev);
}

}  // namespace

GptModel::GptModel(const ModelShape& shape, uint64_t seed,
                   const ModelSplit* split)
    : shape_(shape), split_(split) {
  CHECK_EQ(shape.d_model % shape.n_heads, 0);
  const int64_t d = shape.d_model;
  const double residual_std = kInitStd / std::sqrt(2.0 * shape.n_layers);
  std::vector<NamedParameter> parameters;
  auto add = [&](std::string name, at::Tensor tensor, bool decay) {
    global_parameter_count_ += tensor.numel();
    bool counted_in_norm = true;
    if (split_ != nullptr) {
      tensor = split_->LocalPart(name, tensor);
      counted_in_norm = split_->CountedInNorm(name);
    }
    tensor.requires_grad_(true);
    parameters.push_back({std::move(name), tensor, decay, counted_in_norm});
    return tensor;
  };
  auto normal = [&](std::string name, at::IntArrayRef dims, double stddev,
                    bool decay) {
    const int64_t index = static_cast<int64_t>(parameters.size());
    return add(std::move(name), NormalParameter(dims, stddev, seed, index),
               decay);
  };
  auto zeros = [&](std::string name, int64_t n) {
    return add(std::move(name), at::zeros({n}, at::kFloat), false);
  };
  auto ones = [&](std::string name, int64_t n) {
    return add(std::move(name), at::ones({n}, at::kFloat), false);
  };

  token_embedding_ = normal("wte", {shape.vocab_size, d}, kInitStd, false);
  position_embedding_ = normal("wpe", {shape.seq_len, d}, kInitStd, false);
  global_position_count_ = shape.seq_len * d;
  for (int64_t layer = 0; layer < shape.n_layers; ++layer) {
    const std::string p = absl::StrCat("h.", layer, ".");
    BlockParameters block;
    block.ln1_weight = ones(p + "ln_1.weight", d);
    block.ln1_bias = zeros(p + "ln_1.bias", d);
    block.attention.qkv_weight =
        normal(p + "attn.c_attn.weight", {3 * d, d}, kInitStd, true);
    block.attention.qkv_bias = zeros(p + "attn.c_attn.bias", 3 * d);
    block.attention.proj_weight =
        normal(p + "attn.c_proj.weight", {d, d}, residual_std, true);
    block.attention.proj_bias = zeros(p + "attn.c_proj.bias", d);
    block.ln2_weight = ones(p + "ln_2.weight", d);
    block.ln2_bias = zeros(p + "ln_2.bias", d);
    block.mlp.fc_weight =
        normal(p + "mlp.c_fc.weight", {4 * d, d}, kInitStd, true);
    block.mlp.fc_bias = zeros(p + "mlp.c_fc.bias", 4 * d);
    block.mlp.proj_weight =
        normal(p + "mlp.c_proj.weight", {d, 4 * d}, residual_std, true);
    block.mlp.proj_bias = zeros(p + "mlp.c_proj.bias", d);
    blocks_.push_back(block);
  }
  final_ln_weight_ = ones("ln_f.weight", d);
  final_ln_bias_ = zeros("ln_f.bias", d);

  // Units: the root (embeddings and the final LayerNorm), then each block's
  // 12 parameters.
  const int per_block = 12;
  const int last = static_cast<int>(parameters.size());
  std::vector<std::pair<std::string, std::vector<int>>> units;
  units.push_back({"root", {0, 1, last - 2, last - 1}});
  for (int64_t layer = 0; layer < shape.n_layers; ++layer) {
    std::vector<int> members;
    for (int j = 0; j < per_block; ++j) {
      members.push_back(2 + static_cast<int>(layer) * per_block + j);
    }
    units.push_back({absl::StrCat("h.", layer), members});
  }
  CHECK_EQ(last, 4 + per_block * shape.n_layers);
  store_ = std::make_unique<ParameterStore>(std::move(parameters), units);
}

at::Tensor GptModel::Block(int64_t layer, const at::Tensor& x,
                           const nn::CounterDropout& dropout) const {
  const BlockParameters& block = blocks_[layer];
  if (split_ != nullptr) {
    return split_->Block(block, x, shape_.n_heads, layer, dropout);
  }
  const at::Tensor attention = nn::CausalSelfAttention(
      block.attention, nn::LayerNorm(x, block.ln1_weight, block.ln1_bias),
      shape_.n_heads, dropout, layer);  // (B, T, D)
  const at::Tensor h =
      x + dropout.Apply(attention, layer, nn::DropoutSite::kAttentionOutput);
  const at::Tensor mlp =
      nn::Mlp(block.mlp, nn::LayerNorm(h, block.ln2_weight, block.ln2_bias));
  return h + dropout.Apply(mlp, layer, nn::DropoutSite::kMlpOutput);
}

at::Tensor GptModel::Forward(const at::Tensor& tokens,
                             const ForwardOptions& options) const {
  CHECK_EQ(tokens.dim(), 2);
  CHECK_LE(tokens.size(1), shape_.seq_len);
  const std::vector<UnitHooks*>& hooks = options.unit_hooks;
  auto before = [&hooks](int unit) {
    for (UnitHooks* hook : hooks) hook->BeforeUnitForward(unit);
  };
  auto after = [&hooks](int unit, at::Tensor output) {
    for (UnitHooks* hook : hooks) output = hook->AfterUnitForward(unit, output);
    return output;
  };
  before(kRootUnit);
  at::Tensor x =
      split_ != nullptr
          ? split_->Embed(tokens, token_embedding_, position_embedding_)
          : nn::TokenAndPositionEmbedding(tokens, token_embedding_,
                                          position_embedding_);
  // (B, T, D)
  for (int64_t layer = 0; layer < shape_.n_layers; ++layer) {
    before(BlockUnit(layer));
    for (UnitHooks* hook : hooks) x = hook->BlockInput(BlockUnit(layer), x);
    if (options.activation_checkpointing) {
      const BlockParameters& b = blocks_[layer];
      const std::vector<at::Tensor> block_params = {
          b.ln1_weight,          b.ln1_bias,
          b.attention.qkv_weight, b.attention.qkv_bias,
          b.attention.proj_weight, b.attention.proj_bias,
          b.ln2_weight,          b.ln2_bias,
          b.mlp.fc_weight,       b.mlp.fc_bias,
          b.mlp.proj_weight,     b.mlp.proj_bias};
      // The closure copies the dropout settings: it runs again in backward,
      // after `options` may be gone.
      x = nn::Checkpoint(
          [this, layer, dropout = options.dropout](const at::Tensor& input) {
            return Block(layer, input, dropout);
          },
          x, block_params);
    } else {
      x = Block(layer, x, options.dropout);
    }
    x = after(BlockUnit(layer), x);
  }
  if (split_ != nullptr) {
    return after(kRootUnit, split_->Head(x, final_ln_weight_, final_ln_bias_,
                                         token_embedding_));
  }
  x = nn::LayerNorm(x, final_ln_weight_, final_ln_bias_);
  return after(kRootUnit, gemm::Linear(x, token_embedding_, at::Tensor()));  // (B, T, V)
}

at::Tensor GptModel::Loss(const at::Tensor& logits,
                          const at::Tensor& targets) const {
  return split_ != nullptr ? split_->Loss(logits, targets)
                           : nn::CrossEntropy(logits, targets);
}

at::Tensor GptModel::StageForward(const at::Tensor& input,
                                  const StageView& view,
                                  const ForwardOptions& options) const {
  CHECK(options.unit_hooks.empty() && !options.activation_checkpointing);
  CHECK(0 <= view.first_block && view.first_block <= view.end_block &&
        view.end_block <= shape_.n_layers);
  at::Tensor x = input;
  if (view.embed) {
    CHECK_EQ(input.dim(), 2);
    CHECK_LE(input.size(1), shape_.seq_len);
    x = split_ != nullptr
            ? split_->Embed(input, token_embedding_, position_embedding_)
            : nn::TokenAndPositionEmbedding(input, token_embedding_,
                                            position_embedding_);
  }
  // (B, T, D); with a sequence-parallel split (B, T/n, D)
  for (int64_t layer = view.first_block; layer < view.end_block; ++layer) {
    x = Block(layer, x, options.dropout);
  }
  if (!view.head) return x;
  if (split_ != nullptr) {
    return split_->Head(x, final_ln_weight_, final_ln_bias_, token_embedding_);
  }
  x = nn::LayerNorm(x, final_ln_weight_, final_ln_bias_);
  return gemm::Linear(x, token_embedding_, at::Tensor());  // (B, T, V)
}

int64_t GptModel::ParameterCount() const { return global_parameter_count_; }

int64_t GptModel::FlopsParameterCount() const {
  return ParameterCount() - global_position_count_;
}

double GptModel::FlopsPerToken() const { return FlopsPerTokenOf(shape_); }

}  // namespace mtb
