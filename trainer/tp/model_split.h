// The GPT split across a tensor-parallel group (Megatron-LM, Shoeybi et al.
// 2019 §3; sequence parallelism, Korthikanti et al. 2022 §4.2), built from
// the common/nn pieces //tp_check proves (docs/tp.md):
//
//   embedding   vocab-parallel lookup, summed over the group (g); + wpe
//               (replicated). With SP: split along the sequence.
//   attention   LN1 (replicated; with SP on this rank's part of the sequence,
//               then all-gathered), f, the fused QKV column-parallel (this
//               rank's heads), attention on those heads, the output
//               projection row-parallel, g (SP: reduce-scatter), + its bias
//   MLP         LN2, f, c_fc column-parallel, GELU, c_proj row-parallel, g
//               (SP: reduce-scatter), + its bias
//   head        ln_f, f (SP: all-gather), logits of this rank's vocabulary
//               slice with the tied wte shard
//   loss        vocab-parallel cross-entropy (no rank holds all the logits)
//
// With SP, a replicated parameter applied to this rank's part of the
// sequence only (the LayerNorms, the row-parallel biases) enters through f,
// whose backward sums its gradient over the group: every rank then holds the
// whole gradient, as without SP, so the data-parallel strategy that runs
// over the dp group sees ordinary gradients.
//
// Dropout (docs/tp.md "Dropout"; Megatron's rule, identical masks where the
// values are replicated across the group, distinct where they are sharded)
// with the counter-based masks of common/nn/dropout.h: every rank of the
// group trains the same samples, so a dropout on a replicated tensor (the
// row-parallel outputs after g, without SP) draws the same whole mask on
// every rank, and a dropout on a sharded tensor (this rank's heads'
// attention probabilities; with SP the residual branches on this rank's
// positions) draws this rank's part of the whole mask: distinct across the
// group, and together the one-rank mask.
//
// Collectives go over the tp group's communicator, in the same order on
// every rank (autograd runs one graph per rank in the same order).
#ifndef MTB_TRAINER_TP_MODEL_SPLIT_H_
#define MTB_TRAINER_TP_MODEL_SPLIT_H_

#include <string>
#include <vector>

#include "common/collective/communicator.h"
#include "trainer/model/model.h"
#include "trainer/tp/options.h"

namespace mtb::tp {

class TensorParallelSplit : public ModelSplit {
 public:
  // `tp`: this rank's tp group (not owned; outlives every model built with
  // the split and their autograd graphs).
  TensorParallelSplit(collective::Communicator* tp, bool sequence_parallel,
                      TestFault fault = TestFault::kNone);

  at::Tensor LocalPart(const std::string& name,
                       const at::Tensor& global) const override;
  bool CountedInNorm(const std::string& name) const override;
  at::Tensor Embed(const at::Tensor& tokens, const at::Tensor& wte,
                   const at::Tensor& wpe) const override;
  at::Tensor Block(const BlockParameters& block, const at::Tensor& x,
                   int64_t n_heads, int64_t layer,
                   const nn::CounterDropout& dropout) const override;
  at::Tensor Head(const at::Tensor& x, const at::Tensor& ln_weight,
                  const at::Tensor& ln_bias,
                  const at::Tensor& wte) const override;
  at::Tensor Loss(const at::Tensor& logits,
                  const at::Tensor& targets) const override;
  absl::StatusOr<std::vector<NamedParameter>> GlobalParameters(
      const std::vector<NamedParameter>& parameters) const override;

  collective::Communicator* communicator() const { return tp_; }
  bool sequence_parallel() const { return sequence_parallel_; }

 private:
  // A replicated parameter used on this rank's part of the sequence (SP):
  // through f, so its gradient is summed over the group.
  at::Tensor SequenceShared(const at::Tensor& parameter) const;
  // A LayerNorm parameter: SequenceShared unless the test fault skips it.
  at::Tensor LayerNormParameter(const at::Tensor& parameter) const;
  // Into the tensor-parallel region: f, or with SP the all-gather along
  // the sequence.
  at::Tensor Enter(const at::Tensor& x) const;
  // Out of it from a row-parallel layer's partial sums: g, or with SP the
  // reduce-scatter along the sequence; `unreduced` (a test fault) skips the
  // sum.
  at::Tensor Leave(const at::Tensor& partial, bool unreduced) const;
  // x + dropout(branch + bias): a residual add of a row-parallel layer's
  // reduced output `branch` and its replicated `bias`, with the unsplit
  // block's dropout at `site` (this rank's positions' part with SP, the
  // whole mask without). Without dropout (x + branch) + bias, as before.
  at::Tensor Residual(const at::Tensor& x, const at::Tensor& branch,
                      const at::Tensor& bias,
                      const nn::CounterDropout& dropout, int64_t layer,
                      nn::DropoutSite site) const;

  collective::Communicator* tp_;
  bool sequence_parallel_;
  TestFault fault_;
};

}  // namespace mtb::tp

#endif  // MTB_TRAINER_TP_MODEL_SPLIT_H_
