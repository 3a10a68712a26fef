// Tensors filled from the counter-based normal stream (common/base/counter_rng.h):
// the trainer's GPT-2 initialisation and tp_check's seeded weights and inputs
// use it, so a tensor is a pure function of its key, the same on every rank.
#ifndef MTB_COMMON_NN_INIT_H_
#define MTB_COMMON_NN_INIT_H_

#include <cstdint>

#include "ATen/core/Tensor.h"

namespace mtb {
namespace nn {

// A new float32 tensor of `shape` whose element e (flat, row-major) is
// static_cast<float>(stddev * CounterNormal(key, e)). Does not require grad.
at::Tensor CounterNormalTensor(at::IntArrayRef shape, uint64_t key,
                               double stddev = 1.0);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_INIT_H_
