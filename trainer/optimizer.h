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
#ifndef MTB_TRAINER_OPTIMIZER_H_
#define MTB_TRAINER_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "ATen/core/Tensor.h"
#include "trainer/model.h"

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

}  // namespace mtb

#endif  // MTB_TRAINER_OPTIMIZER_H_
