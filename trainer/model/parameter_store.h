// The flat parameter store: every parameter of a model lives
// in one flat fp32 buffer per unit, and every NamedParameter is a view into
// its unit's buffer; gradients land in a matching flat gradient buffer (as
// PyTorch DDP's gradient_as_bucket_view), so a strategy's buckets and shards
// are slices of flat memory and nothing is copied into or out of them.
//
// Vocabulary:
//   unit     a group of parameters that a sharded strategy moves together
//            (FSDP's unit). The GPT model has a root unit (wte, wpe, ln_f.*;
//            the LM head is tied to wte) and one unit per transformer block.
//   layout   the order of parameters in flat memory: the units in order
//            (root first, then blocks 0..L-1), each unit's parameters in
//            model order. Every unit's buffer is a slice of one contiguous
//            allocation, so a bucket may span two units and still be a
//            slice. Reverse layout order is close to the order in which
//            backward produces gradients (the root unit's wte comes last,
//            because its gradient is complete only after the embedding's).
//   offset   a parameter's first element in the flat buffer.
//
// The parameter list itself (parameters()) keeps the model's order (wte, wpe,
// blocks, ln_f): names, dumps and checkpoints do not change.
//
// Not thread-safe. The tensors stay the caller's: the store rebinds their
// storage (set_data, which keeps each tensor's autograd identity and version
// counter), so handles held elsewhere (the model's block structs) see the
// flat memory too.
#ifndef MTB_TRAINER_MODEL_PARAMETER_STORE_H_
#define MTB_TRAINER_MODEL_PARAMETER_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"

namespace mtb {

struct NamedParameter {
  std::string name;  // nanoGPT's names: "wte", "h.0.attn.c_attn.weight", ...
  at::Tensor tensor;  // fp32 leaf, requires_grad
  // AdamW decoupled weight decay applies (linear weights only: not biases,
  // LayerNorm or embeddings, as nanoGPT).
  bool weight_decay = false;
  // The gradient norm counts this parameter on this rank. False for a
  // parameter replicated across a tensor-parallel group on every rank of the
  // group but one (trainer/tp/), so that the norm counts it once.
  bool counted_in_norm = true;
};

struct ParameterUnit {
  std::string name;             // "root", "h.0", ...
  std::vector<int> parameters;  // indices into parameters(), layout order
  int64_t offset = 0;           // first element in the flat buffer
  int64_t numel = 0;
};

// A run of consecutive flat elements with one weight-decay flag.
struct DecayRun {
  int64_t offset = 0;  // relative to the slice asked for
  int64_t numel = 0;
  bool weight_decay = false;
};

class ParameterStore {
 public:
  // `units`: each a name and parameter indices; together they hold every
  // index once. The values of `parameters` are copied into flat memory and
  // each tensor becomes a view of it.
  ParameterStore(std::vector<NamedParameter> parameters,
                 const std::vector<std::pair<std::string, std::vector<int>>>&
                     units);
  // One unit ("all") holding `parameters` in their order (tests, small tools).
  explicit ParameterStore(std::vector<NamedParameter> parameters);
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  const std::vector<NamedParameter>& parameters() const { return parameters_; }
  const std::vector<ParameterUnit>& units() const { return units_; }
  // Parameter indices in layout order.
  const std::vector<int>& layout() const { return layout_; }
  int64_t offset(int parameter) const { return offsets_[parameter]; }
  int64_t numel() const { return numel_; }

  // (numel) fp32: every parameter's values, in layout order. Writing into it
  // writes the parameters. Undefined after SplitUnitStorage.
  const at::Tensor& flat_parameters() const { return flat_parameters_; }
  // (units()[u].numel) fp32: unit u's parameters in layout order (a slice of
  // flat_parameters(), or the unit's own buffer after SplitUnitStorage).
  // Writing into it writes the parameters without touching their version
  // counters (the parameters keep their own: see set_data above), which is
  // what lets a collective land in it while autograd holds the parameters.
  const at::Tensor& unit_parameters(int unit) const {
    return unit_parameters_[unit];
  }

  // For strategies that free and refill units one at a time (fsdp): gives
  // every unit a storage of its own, rebinds each parameter to a view of its
  // unit's buffer, and releases the flat allocation (flat_parameters() is
  // undefined from then on). Every unit starts freed: the values are gone,
  // so copy out what is needed first (fsdp keeps its shards). A unit's
  // storage can then be resized to its size and back to 0 bytes
  // (AllocateUnit, FreeUnit) while the parameters, and every view autograd
  // saved of them, keep pointing at it. Once per store.
  void SplitUnitStorage();
  bool split() const { return split_; }
  // After SplitUnitStorage: unit u's storage is resized to 0 bytes (its
  // parameters must not be read until AllocateUnit) / back to its size with
  // undefined values (the caller fills unit_parameters(u)). Idempotent.
  void FreeUnit(int unit);
  void AllocateUnit(int unit);
  // Whether unit u's storage holds its values' bytes (always before a split).
  bool unit_allocated(int unit) const;

  // Makes .grad of every parameter of unit u a view of `buffer` ((units()[u]
  // .numel) fp32, laid out as the unit): backward accumulates into it.
  void AttachUnitGradients(int unit, const at::Tensor& buffer);
  // Sets .grad of every parameter of unit u to none.
  void DetachUnitGradients(int unit);
  // (numel) fp32, allocated by AttachGradients (undefined before).
  const at::Tensor& flat_gradients() const { return flat_gradients_; }

  // Allocates the flat gradient buffer (once), zeroes it, and makes every
  // parameter's .grad its view of it: backward then accumulates in place.
  void AttachGradients();
  // Zeroes the flat gradient buffer (the step's zero_grad); gradients stay
  // attached. AttachGradients first.
  void ZeroGradients();
  // Sets every .grad to none and frees the flat gradient buffer (strategies
  // that keep only a gradient shard).
  void DetachGradients();

  // The weight-decay runs of flat elements [offset, offset + numel).
  std::vector<DecayRun> DecayRuns(int64_t offset, int64_t numel) const;

  // The fp64 sum of squares of `values`, flat elements [offset, offset +
  // values.numel()) of a gradient, without the elements of parameters the
  // norm does not count on this rank (NamedParameter::counted_in_norm).
  // When every parameter counts: dot(values, values) in fp64, as before.
  double SquaredNormCounted(const at::Tensor& values, int64_t offset) const;

 private:
  std::vector<NamedParameter> parameters_;
  std::vector<ParameterUnit> units_;
  std::vector<int> layout_;
  std::vector<int64_t> offsets_;  // per parameter
  int64_t numel_ = 0;
  at::Tensor flat_parameters_;
  std::vector<at::Tensor> unit_parameters_;  // per unit
  bool split_ = false;
  at::Tensor flat_gradients_;
};

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_PARAMETER_STORE_H_
