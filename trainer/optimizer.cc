#include "trainer/optimizer.h"

#include <cmath>

#include "ATen/ATen.h"
#include "glog/logging.h"

namespace mtb {

AdamW::AdamW(const std::vector<NamedParameter>& parameters,
             const AdamWOptions& options)
    : parameters_(parameters), options_(options), state_(parameters.size()) {}

void AdamW::Step(double lr) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor param = parameters_[i].tensor;
    const at::Tensor& grad = param.grad();
    if (!grad.defined()) continue;
    State& state = state_[i];
    if (state.step == 0) {
      state.exp_avg = at::zeros_like(param);
      state.exp_avg_sq = at::zeros_like(param);
    }
    ++state.step;
    const double weight_decay =
        parameters_[i].weight_decay ? options_.weight_decay : 0.0;
    param.mul_(1 - lr * weight_decay);
    state.exp_avg.mul_(options_.beta1).add_(grad, 1 - options_.beta1);
    state.exp_avg_sq.mul_(options_.beta2)
        .addcmul_(grad, grad, 1 - options_.beta2);
    const double step = static_cast<double>(state.step);
    const double bias_correction1 = 1 - std::pow(options_.beta1, step);
    const double bias_correction2 = 1 - std::pow(options_.beta2, step);
    const double step_size = lr / bias_correction1;
    const at::Tensor denom =
        (state.exp_avg_sq.sqrt() / std::sqrt(bias_correction2))
            .add_(options_.eps);
    param.addcdiv_(state.exp_avg, denom, -step_size);
  }
}

}  // namespace mtb
