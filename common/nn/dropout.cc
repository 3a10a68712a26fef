#include "common/nn/dropout.h"

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "common/base/counter_rng.h"
#include "glog/logging.h"

namespace mtb {
namespace nn {

at::Tensor DropoutKeepMask(at::IntArrayRef shape,
                           const std::vector<int64_t>& sample_indices,
                           uint64_t seed, int64_t step, int64_t layer,
                           DropoutSite site, double p,
                           int64_t first_element) {
  CHECK_GE(shape.size(), 1u);
  CHECK_GE(first_element, 0);
  CHECK_EQ(shape[0], static_cast<int64_t>(sample_indices.size()));
  at::Tensor keep = at::empty(shape, at::TensorOptions().dtype(at::kBool));
  const int64_t batch = shape[0];
  const int64_t per_sample = batch == 0 ? 0 : keep.numel() / batch;
  const uint64_t threshold = DropThreshold(p);
  bool* data = keep.data_ptr<bool>();
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const uint64_t key = CounterKey(
          {seed, static_cast<uint64_t>(RngStream::kDropout),
           static_cast<uint64_t>(step),
           static_cast<uint64_t>(sample_indices[row]),
           static_cast<uint64_t>(layer), static_cast<uint64_t>(site)});
      bool* out = data + row * per_sample;
      for (int64_t element = 0; element < per_sample; ++element) {
        out[element] = CounterDraw(key, static_cast<uint64_t>(
                                            first_element + element)) >=
                       threshold;
      }
    }
  });
  return keep;
}

at::Tensor CounterDropout::Apply(const at::Tensor& x, int64_t layer,
                                 DropoutSite site) const {
  if (!enabled()) return x;
  CHECK_EQ(x.size(0), static_cast<int64_t>(sample_indices.size()))
      << "dropout: batch rows vs sample indices";
  return ApplyDropoutMask(
      x, DropoutKeepMask(x.sizes(), sample_indices, seed, step, layer, site, p),
      p);
}

at::Tensor CounterDropout::ApplyToPart(const at::Tensor& x,
                                       int64_t first_element, int64_t layer,
                                       DropoutSite site) const {
  if (!enabled()) return x;
  CHECK_EQ(x.size(0), static_cast<int64_t>(sample_indices.size()))
      << "dropout: batch rows vs sample indices";
  return ApplyDropoutMask(x,
                          DropoutKeepMask(x.sizes(), sample_indices, seed, step,
                                          layer, site, p, first_element),
                          p);
}

at::Tensor ApplyDropoutMask(const at::Tensor& x, const at::Tensor& keep,
                            double p) {
  // Written as the definition reads, x * mask / (1 - p): the same kernels in
  // the same order as the PyTorch reference, so results agree bit for bit.
  return x * keep.to(x.scalar_type()) / (1.0 - p);
}

}  // namespace nn
}  // namespace mtb
