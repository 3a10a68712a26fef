// AdamW (Loshchilov & Hutter), exactly as PyTorch 1.13's torch.optim.AdamW
// (single-tensor path, amsgrad off) with two parameter groups: weight decay
// `weight_decay` for parameters marked weight_decay, 0 for the rest. Per
// parameter and step t (its own count, as PyTorch):
//
//   p  *= 1 - lr * wd
//   m   = beta1 m + (1 - beta1) g
//   v   = beta2 v + (1 - beta2) g^2
//   p  -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// State is fp32 whatever the compute precision. Not thread-safe.
//
// Two forms of the same arithmetic: AdamW, per parameter tensor (the
// reference, kept for tests), and FlatAdamW, one elementwise update over flat
// slices of the parameter store (trainer/model/parameter_store.h) with the weight
// decay applied per element through decay runs (a shard may span parameters
// with and without decay). Every op is elementwise, so on the same inputs the
// two give the same bits whatever the slice boundaries
// (optimizer_test.cc checks it at odd boundaries).
#ifndef MTB_TRAINER_MODEL_OPTIMIZER_H_
#define MTB_TRAINER_MODEL_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "ATen/core/Tensor.h"
#include "trainer/model/parameter_store.h"

namespace mtb {

struct AdamWOptions {
  // PyTorch's defaults.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW {
 public:
  // Keeps handles to the parameters' tensors (updated in place).
  AdamW(const std::vector<NamedParameter>& parameters,
        const AdamWOptions& options);

  // Updates every parameter that has a gradient with learning rate `lr`;
  // parameters without one are skipped (and their step count stays).
  void Step(double lr);

  struct State {
    int64_t step = 0;
    at::Tensor exp_avg;     // m, like the parameter; undefined before step 1
    at::Tensor exp_avg_sq;  // v
  };
  const std::vector<State>& state() const { return state_; }

 private:
  std::vector<NamedParameter> parameters_;
  AdamWOptions options_;
  std::vector<State> state_;
};

// One AdamW update of a flat slice; all four tensors are (numel) fp32 and
// `decay` covers it (ParameterStore::DecayRuns). `step` is the 1-based step
// count after this update.
struct AdamWSlice {
  at::Tensor param, grad, exp_avg, exp_avg_sq;
  std::vector<DecayRun> decay;
};
void AdamWUpdate(const AdamWSlice& slice, int64_t step, double lr,
                 const AdamWOptions& options);

// AdamW over ranges of a store's flat parameters: the state of exactly those
// elements (a rank's shard, or everything), updated in pieces of at most
// `piece_elements` so that the update's temporaries stay bounded. Every
// element of a range is updated each step (gradients are flat and always
// present).
class FlatAdamW {
 public:
  struct Range {
    int64_t offset = 0;  // in store.flat_parameters()
    int64_t numel = 0;
  };
  FlatAdamW(const ParameterStore& store, std::vector<Range> ranges,
            const AdamWOptions& options, int64_t piece_elements);

  // grads[i]: (ranges[i].numel) fp32, the gradient of range i.
  void Step(double lr, const std::vector<at::Tensor>& grads);
  // The same update of parameters kept outside the store's flat buffer
  // (fsdp's shards): params[i] is (ranges[i].numel) fp32, the values of
  // range i, updated in place. The ranges still name flat-layout elements
  // (weight decay, and which part of the model each rank owns).
  void Step(double lr, const std::vector<at::Tensor>& grads,
            const std::vector<at::Tensor>& params);

  int64_t step() const { return step_; }
  // fp32 bytes of m and v (the optimizer state this rank holds).
  int64_t state_bytes() const;
  const std::vector<Range>& ranges() const { return ranges_; }

  // Views of the live state, for checkpoints (trainer/model/state_pieces.h):
  // writing into them sets the state. m and v of flat elements
  // [offset, offset + numel), which must lie inside one range; the step
  // count as a (1) int64 view of this object's counter (no allocation, so
  // the held-memory walk stays exact). Valid while this object lives.
  at::Tensor exp_avg_of(int64_t offset, int64_t numel) const;
  at::Tensor exp_avg_sq_of(int64_t offset, int64_t numel) const;
  at::Tensor step_count();

 private:
  const ParameterStore& store_;
  std::vector<Range> ranges_;
  std::vector<std::vector<DecayRun>> decay_;  // per range
  AdamWOptions options_;
  int64_t piece_elements_;
  at::Tensor exp_avg_, exp_avg_sq_;  // (sum of range numels)
  std::vector<int64_t> state_offsets_;  // per range, into exp_avg_
  int64_t step_ = 0;  // the number of updates so far

  int64_t StateOffset(int64_t offset, int64_t numel) const;
};

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_OPTIMIZER_H_
