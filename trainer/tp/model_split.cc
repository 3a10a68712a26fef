#include "trainer/tp/model_split.h"

#include "ATen/ATen.h"
#include "common/gemm/ops.h"
#include "common/nn/attention.h"
#include "common/nn/dropout.h"
#include "common/nn/layers.h"
#include "common/nn/tensor_parallel.h"
#include "glog/logging.h"
#include "trainer/tp/layout.h"
#include "trainer/tp/strategy.h"

namespace mtb::tp {
namespace {
constexpr int64_t kSequenceDim = 1;  // activations are (B, T, D)
}  // namespace

TensorParallelSplit::TensorParallelSplit(collective::Communicator* tp,
                                         bool sequence_parallel,
                                         TestFault fault)
    : tp_(tp), sequence_parallel_(sequence_parallel), fault_(fault) {
  CHECK(tp_ != nullptr);
}

at::Tensor TensorParallelSplit::LocalPart(const std::string& name,
                                          const at::Tensor& global) const {
  return tp::LocalPart(SplitOf(name), global, tp_->rank(), tp_->world_size());
}

bool TensorParallelSplit::CountedInNorm(const std::string& name) const {
  return SplitOf(name) != Split::kReplicated || tp_->rank() == 0 ||
         fault_ == TestFault::kNormDoubleCounted;
}

at::Tensor TensorParallelSplit::SequenceShared(
    const at::Tensor& parameter) const {
  return sequence_parallel_ ? nn::CopyToTensorParallelRegion(parameter, tp_)
                            : parameter;
}

at::Tensor TensorParallelSplit::LayerNormParameter(
    const at::Tensor& parameter) const {
  return fault_ == TestFault::kLayerNormUnsynced ? parameter
                                                 : SequenceShared(parameter);
}

at::Tensor TensorParallelSplit::Enter(const at::Tensor& x) const {
  return sequence_parallel_
             ? nn::GatherFromSequenceParallelRegion(x, kSequenceDim, tp_)
             : nn::CopyToTensorParallelRegion(x, tp_);
}

at::Tensor TensorParallelSplit::Leave(const at::Tensor& partial,
                                      bool unreduced) const {
  if (unreduced) {
    if (!sequence_parallel_) return partial;
    const int64_t part = partial.size(kSequenceDim) / tp_->world_size();
    return partial.narrow(kSequenceDim, tp_->rank() * part, part);
  }
  return sequence_parallel_
             ? nn::ReduceScatterToSequenceParallelRegion(partial, kSequenceDim,
                                                         tp_)
             : nn::ReduceFromTensorParallelRegion(partial, tp_);
}

at::Tensor TensorParallelSplit::Embed(const at::Tensor& tokens,
                                      const at::Tensor& wte,
                                      const at::Tensor& wpe) const {
  CHECK_EQ(tokens.dim(), 2);
  const at::Tensor x = nn::VocabParallelEmbedding(tokens, wte, tp_) +
                       wpe.slice(0, 0, tokens.size(1));  // (B, T, D)
  return sequence_parallel_
             ? nn::ScatterToSequenceParallelRegion(x, kSequenceDim, tp_)
             : x;
}

at::Tensor TensorParallelSplit::Residual(const at::Tensor& x,
                                         const at::Tensor& branch,
                                         const at::Tensor& bias,
                                         const nn::CounterDropout& dropout,
                                         int64_t layer,
                                         nn::DropoutSite site) const {
  // Without dropout: (x + branch) + bias, the split's order before dropout
  // (--dropout=0 is unchanged bit for bit).
  if (!dropout.enabled()) return x + branch + SequenceShared(bias);
  const at::Tensor dropped_in = branch + SequenceShared(bias);  // (B, T', D)
  if (sequence_parallel_) {
    // Sharded: this rank's positions [r*T/n, (r+1)*T/n) of each sample.
    const int64_t part = fault_ == TestFault::kShardedDropoutShared
                             ? 0
                             : tp_->rank() * dropped_in[0].numel();
    return x + dropout.ApplyToPart(dropped_in, part, layer, site);
  }
  // Replicated: the whole mask, the same on every rank of the group.
  nn::CounterDropout replicated = dropout;
  if (fault_ == TestFault::kReplicatedDropoutPerRank) {
    replicated.seed += static_cast<uint64_t>(tp_->rank());
  }
  return x + replicated.Apply(dropped_in, layer, site);
}

at::Tensor TensorParallelSplit::Block(const BlockParameters& block,
                                      const at::Tensor& x, int64_t n_heads,
                                      int64_t layer,
                                      const nn::CounterDropout& dropout) const {
  const int n = tp_->world_size();
  CHECK_EQ(n_heads % n, 0);
  const int64_t local_heads = n_heads / n;
  // This rank's heads [r*H/n, (r+1)*H/n) (layout.h): their part of the
  // attention-probability mask.
  const int64_t first_head =
      fault_ == TestFault::kShardedDropoutShared ? 0 : tp_->rank() * local_heads;
  nn::AttentionParams attention = block.attention;
  attention.proj_bias = at::Tensor();  // added once, after the sum
  const at::Tensor ln1 =
      nn::LayerNorm(x, LayerNormParameter(block.ln1_weight),
                    LayerNormParameter(block.ln1_bias));
  const at::Tensor attention_partial = nn::CausalSelfAttention(
      attention, Enter(ln1), local_heads, dropout, layer, first_head);
  const at::Tensor h = Residual(x, Leave(attention_partial, /*unreduced=*/false),
                                block.attention.proj_bias, dropout, layer,
                                nn::DropoutSite::kAttentionOutput);
  nn::MlpParams mlp = block.mlp;
  mlp.proj_bias = at::Tensor();
  const at::Tensor ln2 =
      nn::LayerNorm(h, LayerNormParameter(block.ln2_weight),
                    LayerNormParameter(block.ln2_bias));
  const at::Tensor mlp_partial = nn::Mlp(mlp, Enter(ln2));
  return Residual(h,
                  Leave(mlp_partial, fault_ == TestFault::kRowParallelUnreduced),
                  block.mlp.proj_bias, dropout, layer,
                  nn::DropoutSite::kMlpOutput);
}

at::Tensor TensorParallelSplit::Head(const at::Tensor& x,
                                     const at::Tensor& ln_weight,
                                     const at::Tensor& ln_bias,
                                     const at::Tensor& wte) const {
  const at::Tensor y = nn::LayerNorm(x, LayerNormParameter(ln_weight),
                                     LayerNormParameter(ln_bias));
  return gemm::Linear(Enter(y), wte, at::Tensor());  // (B, T, V/n)
}

at::Tensor TensorParallelSplit::Loss(const at::Tensor& logits,
                                     const at::Tensor& targets) const {
  const int64_t vocab_part = logits.size(-1);
  return nn::VocabParallelCrossEntropy(
             logits.to(at::kFloat).reshape({-1, vocab_part}),
             targets.reshape({-1}), tp_)
      .mean();
}

absl::StatusOr<std::vector<NamedParameter>> TensorParallelSplit::GlobalParameters(
    const std::vector<NamedParameter>& parameters) const {
  return GatherGlobalParameters(parameters, *tp_);
}

}  // namespace mtb::tp
