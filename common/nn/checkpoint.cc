// Checkpoint is a custom autograd Function (torch::autograd::Function). Its
// inputs are (closure, x, params...): the closure is a non-tensor input, so
// backward returns an undefined gradient for it; x and every parameter get the
// gradient computed by re-running the closure. Non-tensor state travels in the
// context's saved_data as a capsule.
#include "common/nn/checkpoint.h"

#include <utility>
#include <vector>

#include "ATen/core/ivalue.h"
#include "common/nn/autocast.h"
#include "glog/logging.h"
#include "torch/csrc/autograd/autograd.h"
#include "torch/csrc/autograd/custom_function.h"

namespace mtb {
namespace nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Closure : torch::CustomClassHolder {
  Closure(CheckpointFn fn, AutocastState autocast)
      : fn(std::move(fn)), autocast(autocast) {}
  CheckpointFn fn;
  AutocastState autocast;
};

class CheckpointFunction
    : public torch::autograd::Function<CheckpointFunction> {
 public:
  // Runs under no_grad (Function::apply guarantees it).
  static at::Tensor forward(AutogradContext* context,
                            c10::intrusive_ptr<Closure> closure,
                            const at::Tensor& x, at::TensorList params) {
    at::Tensor output = closure->fn(x);
    std::vector<at::Tensor> saved = {x};
    saved.insert(saved.end(), params.begin(), params.end());
    context->save_for_backward(saved);
    context->saved_data["closure"] = c10::IValue::make_capsule(closure);
    return output;
  }

  static variable_list backward(AutogradContext* context,
                                variable_list grad_outputs) {
    CHECK_EQ(grad_outputs.size(), 1u);
    const variable_list saved = context->get_saved_variables();
    const auto closure = c10::static_intrusive_pointer_cast<Closure>(
        context->saved_data["closure"].toCapsule());
    const at::Tensor x = saved[0].detach().requires_grad_(true);

    at::Tensor output;
    {
      torch::autograd::AutoGradMode grad_mode(true);
      AutocastGuard autocast(closure->autocast);
      output = closure->fn(x);
    }

    // Gradients for x and for each parameter that takes part.
    variable_list inputs = {x};
    std::vector<size_t> param_slots;  // index into `saved` of each input
    for (size_t i = 1; i < saved.size(); ++i) {
      if (saved[i].requires_grad()) {
        inputs.push_back(saved[i]);
        param_slots.push_back(i);
      }
    }
    const variable_list grads = torch::autograd::grad(
        {output}, inputs, {grad_outputs[0]}, /*retain_graph=*/false,
        /*create_graph=*/false, /*allow_unused=*/true);

    // One entry per forward input: closure, x, params...
    variable_list result(saved.size() + 1);
    result[1] = grads[0];
    for (size_t j = 0; j < param_slots.size(); ++j) {
      result[param_slots[j] + 1] = grads[j + 1];
    }
    return result;
  }
};

}  // namespace

at::Tensor Checkpoint(CheckpointFn fn, const at::Tensor& x,
                      at::TensorList params) {
  auto closure =
      c10::make_intrusive<Closure>(std::move(fn), CurrentAutocastState());
  return CheckpointFunction::apply(closure, x, params);
}

}  // namespace nn
}  // namespace mtb
