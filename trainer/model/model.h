// The GPT decoder (docs/trainer.md "Model"), built from the functional layers in common/nn:
// token embedding + learned positions, n_layers pre-norm blocks
//   x = x + drop(attn(LN1(x)));  x = x + drop(mlp(LN2(x)))
// a final LayerNorm and an LM head tied to the token embedding. Shapes: B batch,
// T sequence (<= seq_len), D d_model, V vocab_size.
//
// Parameters are one ordered list (the order of construction: wte, wpe,
// blocks 0..L-1, ln_f) whose tensors are views into the flat parameter store
// (trainer/model/parameter_store.h): a root unit (wte, wpe, ln_f) then one unit per
// block. The per-block structs alias the same tensors.
#ifndef MTB_TRAINER_MODEL_MODEL_H_
#define MTB_TRAINER_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "common/nn/attention.h"
#include "common/nn/dropout.h"
#include "common/nn/layers.h"
#include "trainer/model/model_shape.h"
#include "trainer/model/parameter_store.h"
#include "trainer/model/unit_hooks.h"

namespace mtb {

struct BlockParameters {
  at::Tensor ln1_weight, ln1_bias;  // (D)
  nn::AttentionParams attention;
  at::Tensor ln2_weight, ln2_bias;  // (D)
  nn::MlpParams mlp;
};

// How the model's layers are split across the ranks of a tensor-parallel
// group (trainer/tp/model_split.h; docs/tp.md). A GptModel without one holds
// and runs the whole model; with one, each parameter is this rank's part of
// the global tensor and the split runs the embedding, the blocks, the head
// and the loss with their collectives.
class ModelSplit {
 public:
  virtual ~ModelSplit() = default;
  // This rank's part of parameter `name` (global initial values `global`),
  // and whether the gradient norm counts it on this rank (a parameter
  // replicated across the group is counted on one rank only).
  virtual at::Tensor LocalPart(const std::string& name,
                               const at::Tensor& global) const = 0;
  virtual bool CountedInNorm(const std::string& name) const = 0;
  // tokens (B, T) -> the first block's input.
  virtual at::Tensor Embed(const at::Tensor& tokens, const at::Tensor& wte,
                           const at::Tensor& wpe) const = 0;
  // One block; `dropout` as the unsplit block's (the split decides which
  // part of each mask this rank draws: docs/tp.md "Dropout").
  virtual at::Tensor Block(const BlockParameters& block,
                           const at::Tensor& x, int64_t n_heads,
                           int64_t layer,
                           const nn::CounterDropout& dropout) const = 0;
  // The last block's output -> this rank's logits.
  virtual at::Tensor Head(const at::Tensor& x, const at::Tensor& ln_weight,
                          const at::Tensor& ln_bias,
                          const at::Tensor& wte) const = 0;
  // The mean cross-entropy of Head's logits against targets (B, T).
  virtual at::Tensor Loss(const at::Tensor& logits,
                          const at::Tensor& targets) const = 0;
  // The logical global tensors of `parameters` (this rank's parts), in the
  // same order, as one rank's model holds them: what a digest or a dump of
  // the model describes. Collective over the split's group.
  virtual absl::StatusOr<std::vector<NamedParameter>> GlobalParameters(
      const std::vector<NamedParameter>& parameters) const = 0;
};

struct ForwardOptions {
  // Dropout settings and keys (p = 0: none).
  nn::CounterDropout dropout;
  // Recompute each block in backward instead of keeping its activations.
  bool activation_checkpointing = false;
  // Called before and after each unit's forward, in this order
  // (trainer/model/unit_hooks.h); not owned, must outlive the forward (and, for
  // gradient hooks they register, the backward).
  std::vector<UnitHooks*> unit_hooks;
};

// A pipeline stage's slice of the model (trainer/pipeline/): blocks
// [first_block, end_block), after the embeddings when `embed` (the first
// stage) and before the final LayerNorm and the tied head when `head` (the
// last).
struct StageView {
  int64_t first_block = 0;
  int64_t end_block = 0;
  bool embed = false;
  bool head = false;
};

class GptModel {
 public:
  // GPT-2 initialisation: every weight normal(0, 0.02), the residual output
  // projections (attn.c_proj, mlp.c_proj) normal(0, 0.02 / sqrt(2 L)), biases
  // zero, LayerNorm weight one and bias zero. Values come from the
  // counter-based key (seed, kInit, parameter index), never a generator.
  //
  // With `split` (not owned; outlives the model) every parameter is this
  // rank's part of that global initialisation (ModelSplit).
  GptModel(const ModelShape& shape, uint64_t seed,
           const ModelSplit* split = nullptr);

  const ModelShape& shape() const { return shape_; }
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  const std::vector<NamedParameter>& parameters() const {
    return store_->parameters();
  }
  // The flat store behind parameters(); strategies slice it.
  ParameterStore& store() const { return *store_; }
  // The store's unit of the root (embeddings, ln_f, tied head) and of block
  // `layer` (the order in which the constructor lays them out).
  static constexpr int kRootUnit = 0;
  static int BlockUnit(int64_t layer) { return static_cast<int>(layer) + 1; }

  // tokens: (B, T) int64 -> logits (B, T, V). Call under nn::AutocastGuard for
  // bf16.
  at::Tensor Forward(const at::Tensor& tokens,
                     const ForwardOptions& options) const;
  // The mean cross-entropy of Forward's logits against targets (B, T).
  at::Tensor Loss(const at::Tensor& logits, const at::Tensor& targets) const;

  // One pipeline stage's forward: input is tokens (B, T) int64 when
  // view.embed, else the previous stage's output (B, T, D); returns logits
  // (B, T, V) when view.head, else (B, T, D). The same operations as
  // Forward on those parts, so the stages in a row compute Forward's values
  // bit for bit. With a split, its Embed, Block and Head: this rank's part
  // (logits of its vocabulary slice; with sequence parallelism the
  // activations between stages are (B, T/n, D)), for Loss. No unit hooks,
  // no activation checkpointing (the pipeline refuses both).
  at::Tensor StageForward(const at::Tensor& input, const StageView& view,
                          const ForwardOptions& options) const;

  // The split the model was built with (nullptr: whole).
  const ModelSplit* split() const { return split_; }

  // Of the global model (with a split too).
  int64_t ParameterCount() const;
  // N in the FLOPs formula: every parameter but the position embedding (the
  // token embedding is also the LM head's matmul).
  int64_t FlopsParameterCount() const;
  // Training FLOPs per token (FlopsPerTokenOf, trainer/model/model_shape.h).
  double FlopsPerToken() const;

 private:
  at::Tensor Block(int64_t layer, const at::Tensor& x,
                   const nn::CounterDropout& dropout) const;

  ModelShape shape_;
  const ModelSplit* split_ = nullptr;
  int64_t global_parameter_count_ = 0;
  int64_t global_position_count_ = 0;
  at::Tensor token_embedding_;     // (V, D), also the LM head
  at::Tensor position_embedding_;  // (seq_len, D)
  std::vector<BlockParameters> blocks_;
  at::Tensor final_ln_weight_, final_ln_bias_;  // (D)
  std::unique_ptr<ParameterStore> store_;
};

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_MODEL_H_
