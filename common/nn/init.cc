#include "common/nn/init.h"

#include "ATen/ATen.h"
#include "common/base/counter_rng.h"

namespace mtb {
namespace nn {

at::Tensor CounterNormalTensor(at::IntArrayRef shape, uint64_t key,
                               double stddev) {
  at::Tensor tensor = at::empty(shape, at::kFloat);
  float* data = tensor.data_ptr<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    data[i] = static_cast<float>(stddev * CounterNormal(key, i));
  }
  return tensor;
}

}  // namespace nn
}  // namespace mtb
