// Functional transformer layers: every function takes its parameters
// explicitly, so the trainer's strategies, tp_check and moe_comm run the same
// math on whole or sharded parameters. Shapes use B = batch, T = sequence
// length, D = model width, V = vocabulary.
//
// Precision: under CPU bf16 autocast (common/nn/autocast.h) linear layers run in
// bf16; LayerNorm and cross-entropy run in fp32 (LayerNorm casts by hand:
// LibTorch 1.13's autocast crashes on bf16 input with fp32 weights).
// Matrix products run on the process's GEMM backend (common/gemm/ops.h).
#ifndef MTB_COMMON_NN_LAYERS_H_
#define MTB_COMMON_NN_LAYERS_H_

#include "ATen/core/Tensor.h"

namespace mtb {
namespace nn {

// LayerNorm over the last dimension, computed in fp32 and returned in x's
// dtype. x: (..., D); weight, bias: (D).
at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight,
                     const at::Tensor& bias, double eps = 1e-5);

// GELU, exact (erf) form as torch.nn.GELU().
at::Tensor Gelu(const at::Tensor& x);

// The transformer MLP D -> 4D -> D with GELU between (torch.nn.Linear layout:
// weights are (out, in)).
struct MlpParams {
  at::Tensor fc_weight;    // (4D, D)
  at::Tensor fc_bias;      // (4D)
  at::Tensor proj_weight;  // (D, 4D)
  at::Tensor proj_bias;    // (D)
};

// x: (..., D) -> (..., D).
at::Tensor Mlp(const MlpParams& params, const at::Tensor& x);

// Token embedding plus learned positions. tokens: (B, T) int64;
// token_embedding: (V, D); position_embedding: (T_max, D) with T <= T_max.
// Returns (B, T, D).
at::Tensor TokenAndPositionEmbedding(const at::Tensor& tokens,
                                     const at::Tensor& token_embedding,
                                     const at::Tensor& position_embedding);

// Mean cross-entropy over every position, computed in fp32.
// logits: (B, T, V) any float dtype; targets: (B, T) int64. Returns a scalar.
at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_LAYERS_H_
