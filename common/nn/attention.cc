#include "common/nn/attention.h"

#include <cmath>
#include <limits>

#include "ATen/ATen.h"
#include "common/gemm/ops.h"
#include "glog/logging.h"

namespace mtb {
namespace nn {

at::Tensor CausalSelfAttention(const AttentionParams& params,
                               const at::Tensor& x, int64_t n_heads,
                               const CounterDropout& dropout, int64_t layer) {
  CHECK(!dropout.enabled() || params.qkv_weight.size(0) == 3 * x.size(2))
      << "attention dropout on a head shard needs its first head";
  return CausalSelfAttention(params, x, n_heads, dropout, layer,
                             /*first_head=*/0);
}

at::Tensor CausalSelfAttention(const AttentionParams& params,
                               const at::Tensor& x, int64_t n_heads,
                               const CounterDropout& dropout, int64_t layer,
                               int64_t first_head) {
  CHECK_EQ(x.dim(), 3);
  CHECK_GE(first_head, 0);
  const int64_t batch = x.size(0);
  const int64_t seq_len = x.size(1);
  // The width of this call's heads: D, or a rank's share of D when heads are
  // split across ranks (see the header).
  CHECK_EQ(params.qkv_weight.size(0) % 3, 0);
  const int64_t width = params.qkv_weight.size(0) / 3;
  CHECK_EQ(width % n_heads, 0);
  const int64_t head_dim = width / n_heads;

  const at::Tensor qkv =
      gemm::Linear(x, params.qkv_weight, params.qkv_bias);  // (B, T, 3W)
  const std::vector<at::Tensor> parts = qkv.split(width, /*dim=*/2);
  auto heads = [&](const at::Tensor& t) {  // (B, T, W) -> (B, H, T, Dh)
    return t.view({batch, seq_len, n_heads, head_dim}).transpose(1, 2);
  };
  const at::Tensor q = heads(parts[0]);
  const at::Tensor k = heads(parts[1]);
  const at::Tensor v = heads(parts[2]);

  at::Tensor scores = gemm::Matmul(q, k.transpose(-2, -1)) *
                      (1.0 / std::sqrt(static_cast<double>(head_dim)));
  // (B, H, T, T)
  const at::Tensor future =
      at::ones({seq_len, seq_len}, at::TensorOptions().dtype(at::kBool))
          .triu(1);  // (T, T): true where key position > query position
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  at::Tensor probabilities = at::softmax(scores, -1);
  // This call's heads are [first_head, first_head + n_heads) of the whole
  // sample's (heads, T, T): its mask is that part of the whole one.
  probabilities = dropout.ApplyToPart(
      probabilities, first_head * seq_len * seq_len, layer,
      DropoutSite::kAttentionProbabilities);

  const at::Tensor context = gemm::Matmul(probabilities, v)  // (B, H, T, Dh)
                                 .transpose(1, 2)
                                 .reshape({batch, seq_len, width});
  return gemm::Linear(context, params.proj_weight, params.proj_bias);
}

}  // namespace nn
}  // namespace mtb
