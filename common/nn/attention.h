// Causal multi-head self-attention with a fused QKV projection, functional
// (parameters passed in). Shapes: B batch, T sequence, D model width, H heads,
// Dh = D / H.
#ifndef MTB_COMMON_NN_ATTENTION_H_
#define MTB_COMMON_NN_ATTENTION_H_

#include <cstdint>

#include "ATen/core/Tensor.h"
#include "common/nn/dropout.h"

namespace mtb {
namespace nn {

struct AttentionParams {
  // Rows [0, D) project to queries, [D, 2D) to keys, [2D, 3D) to values; within
  // each, head h owns rows [h*Dh, (h+1)*Dh) (GPT-2's c_attn layout).
  at::Tensor qkv_weight;   // (3D, D)
  at::Tensor qkv_bias;     // (3D)
  at::Tensor proj_weight;  // (D, D)
  at::Tensor proj_bias;    // (D)
};

// x: (B, T, D) -> (B, T, D). Position t attends to positions <= t only: the
// scores of later positions are -inf before the softmax, so they contribute
// exact zeros. `dropout` applies to the attention probabilities (B, H, T, T)
// with site kAttentionProbabilities and this `layer`.
at::Tensor CausalSelfAttention(const AttentionParams& params,
                               const at::Tensor& x, int64_t n_heads,
                               const CounterDropout& dropout, int64_t layer);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_ATTENTION_H_
