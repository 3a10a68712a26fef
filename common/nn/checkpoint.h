// Activation checkpointing: run a function without keeping its intermediate
// activations and recompute them in backward.
#ifndef MTB_COMMON_NN_CHECKPOINT_H_
#define MTB_COMMON_NN_CHECKPOINT_H_

#include <functional>

#include "ATen/core/Tensor.h"

namespace mtb {
namespace nn {

using CheckpointFn = std::function<at::Tensor(const at::Tensor& x)>;

// Returns fn(x) and records one autograd node that, in backward, runs fn again
// on a detached copy of x (with grad mode on and the autocast state of the
// forward call) and backpropagates through that recomputation into x and
// `params`.
//
// Contract: fn must compute the same values when run again: its only
// randomness is counter-based dropout (common/nn/dropout.h), which is. The
// differentiable tensors fn reads other than x must all be in `params` (their
// gradients flow through this node; any other tensor is treated as a
// constant). fn and whatever it captures must stay valid until backward has
// run or the graph is freed.
at::Tensor Checkpoint(CheckpointFn fn, const at::Tensor& x,
                      at::TensorList params);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_CHECKPOINT_H_
