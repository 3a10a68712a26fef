#include "common/nn/layers.h"

#include "ATen/ATen.h"
#include "common/gemm/ops.h"
#include "glog/logging.h"

namespace mtb {
namespace nn {

at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight,
                     const at::Tensor& bias, double eps) {
  const at::Tensor normalized = at::layer_norm(
      x.to(at::kFloat), {x.size(-1)}, weight.to(at::kFloat),
      bias.to(at::kFloat), eps);
  return normalized.to(x.scalar_type());
}

at::Tensor Gelu(const at::Tensor& x) { return at::gelu(x); }

at::Tensor Mlp(const MlpParams& params, const at::Tensor& x) {
  const at::Tensor hidden =
      Gelu(gemm::Linear(x, params.fc_weight, params.fc_bias));  // (..., 4D)
  return gemm::Linear(hidden, params.proj_weight, params.proj_bias);
}

at::Tensor TokenAndPositionEmbedding(const at::Tensor& tokens,
                                     const at::Tensor& token_embedding,
                                     const at::Tensor& position_embedding) {
  CHECK_EQ(tokens.dim(), 2);
  const int64_t seq_len = tokens.size(1);
  CHECK_LE(seq_len, position_embedding.size(0));
  const at::Tensor token_vectors =
      at::embedding(token_embedding, tokens);  // (B, T, D)
  return token_vectors + position_embedding.slice(0, 0, seq_len);
}

at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& targets) {
  const int64_t vocab = logits.size(-1);
  return at::cross_entropy_loss(logits.to(at::kFloat).reshape({-1, vocab}),
                                targets.reshape({-1}));
}

}  // namespace nn
}  // namespace mtb
