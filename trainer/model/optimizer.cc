#include "trainer/model/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

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

void AdamWUpdate(const AdamWSlice& slice, int64_t step, double lr,
                 const AdamWOptions& options) {
  at::NoGradGuard no_grad;
  const at::Tensor& param = slice.param;
  const at::Tensor& grad = slice.grad;
  // As AdamW::Step: p *= 1 - lr * wd only where decay applies (the
  // per-parameter form multiplies the rest by exactly 1).
  for (const DecayRun& run : slice.decay) {
    if (!run.weight_decay) continue;
    param.narrow(0, run.offset, run.numel).mul_(1 - lr * options.weight_decay);
  }
  slice.exp_avg.mul_(options.beta1).add_(grad, 1 - options.beta1);
  slice.exp_avg_sq.mul_(options.beta2).addcmul_(grad, grad, 1 - options.beta2);
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1 - std::pow(options.beta1, t);
  const double bias_correction2 = 1 - std::pow(options.beta2, t);
  const double step_size = lr / bias_correction1;
  const at::Tensor denom =
      (slice.exp_avg_sq.sqrt() / std::sqrt(bias_correction2))
          .add_(options.eps);
  param.addcdiv_(slice.exp_avg, denom, -step_size);
}

FlatAdamW::FlatAdamW(const ParameterStore& store, std::vector<Range> ranges,
                     const AdamWOptions& options, int64_t piece_elements)
    : store_(store),
      ranges_(std::move(ranges)),
      options_(options),
      piece_elements_(piece_elements) {
  CHECK_GT(piece_elements_, 0);
  int64_t total = 0;
  for (const Range& range : ranges_) {
    CHECK(range.offset >= 0 && range.numel >= 0 &&
          range.offset + range.numel <= store.numel());
    decay_.push_back(store.DecayRuns(range.offset, range.numel));
    state_offsets_.push_back(total);
    total += range.numel;
  }
  exp_avg_ = at::zeros({total}, at::kFloat);
  exp_avg_sq_ = at::zeros({total}, at::kFloat);
}

at::Tensor FlatAdamW::step_count() {
  return at::from_blob(&step_, {1}, at::kLong);
}

int64_t FlatAdamW::StateOffset(int64_t offset, int64_t numel) const {
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const Range& range = ranges_[i];
    if (offset >= range.offset && offset + numel <= range.offset + range.numel) {
      return state_offsets_[i] + (offset - range.offset);
    }
  }
  LOG(FATAL) << "flat elements [" << offset << ", " << offset + numel
             << ") are not inside one optimizer range";
  return -1;
}

at::Tensor FlatAdamW::exp_avg_of(int64_t offset, int64_t numel) const {
  return exp_avg_.narrow(0, StateOffset(offset, numel), numel);
}

at::Tensor FlatAdamW::exp_avg_sq_of(int64_t offset, int64_t numel) const {
  return exp_avg_sq_.narrow(0, StateOffset(offset, numel), numel);
}

int64_t FlatAdamW::state_bytes() const {
  return (exp_avg_.numel() + exp_avg_sq_.numel()) * 4;
}

void FlatAdamW::Step(double lr, const std::vector<at::Tensor>& grads) {
  const at::Tensor& flat = store_.flat_parameters();
  CHECK(flat.defined()) << "the store's flat buffer is split: pass params";
  std::vector<at::Tensor> params;
  for (const Range& range : ranges_) {
    params.push_back(flat.narrow(0, range.offset, range.numel));
  }
  Step(lr, grads, params);
}

void FlatAdamW::Step(double lr, const std::vector<at::Tensor>& grads,
                     const std::vector<at::Tensor>& params) {
  CHECK_EQ(grads.size(), ranges_.size());
  CHECK_EQ(params.size(), ranges_.size());
  const int64_t step = ++step_;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const Range& range = ranges_[i];
    CHECK_EQ(grads[i].numel(), range.numel) << "range " << i;
    CHECK_EQ(params[i].numel(), range.numel) << "range " << i;
    const at::Tensor flat_param = params[i].view({-1});
    for (int64_t begin = 0; begin < range.numel; begin += piece_elements_) {
      const int64_t length = std::min(piece_elements_, range.numel - begin);
      AdamWSlice slice;
      slice.param = flat_param.narrow(0, begin, length);
      slice.grad = grads[i].view({-1}).narrow(0, begin, length);
      slice.exp_avg = exp_avg_.narrow(0, state_offsets_[i] + begin, length);
      slice.exp_avg_sq =
          exp_avg_sq_.narrow(0, state_offsets_[i] + begin, length);
      for (const DecayRun& run : decay_[i]) {
        const int64_t start = std::max(run.offset, begin);
        const int64_t stop = std::min(run.offset + run.numel, begin + length);
        if (start < stop) {
          slice.decay.push_back({start - begin, stop - start, run.weight_decay});
        }
      }
      AdamWUpdate(slice, step, lr, options_);
    }
  }
}

}  // namespace mtb
