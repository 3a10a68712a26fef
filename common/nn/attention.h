// Causal multi-head self-attention with a fused QKV projection, functional
// (parameters passed in). Shapes: B batch, T sequence, D model width, H heads,
// Dh = D / H. The projections and the batched Q·Kᵀ and A·V run on the
// process's GEMM backend (common/gemm/ops.h).
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
//
// Heads split across ranks (Megatron's tensor parallelism, tp_check): a rank
// passes the QKV rows of its n_heads heads, (3 * n_heads * Dh, D), and the
// matching columns of the output projection, (D, n_heads * Dh), without its
// bias; the result is that rank's partial sum of the projection, to be
// all-reduced. The local width n_heads * Dh is qkv_weight.size(0) / 3, which is
// D when nothing is split. With dropout, a head shard must say which heads
// it holds (the overload below; this one CHECKs that it holds them all).
at::Tensor CausalSelfAttention(const AttentionParams& params,
                               const at::Tensor& x, int64_t n_heads,
                               const CounterDropout& dropout, int64_t layer);

// A head shard: heads [first_head, first_head + n_heads) of the whole
// attention. Its probabilities (B, n_heads, T, T) are dropped with that part
// of the whole sample's mask (CounterDropout::ApplyToPart), so the shards of
// a tp group draw distinct masks, together the unsplit attention's.
at::Tensor CausalSelfAttention(const AttentionParams& params,
                               const at::Tensor& x, int64_t n_heads,
                               const CounterDropout& dropout, int64_t layer,
                               int64_t first_head);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_ATTENTION_H_
