// Dropout whose masks come from counter-based keys (common/base/counter_rng.h),
// never from a generator's state. Element e of sample row b is kept iff
//
//   CounterDraw(CounterKey({seed, kDropout, step, sample_indices[b], layer,
//                           site}), e) >= DropThreshold(p)
//
// where e is the element's flat (row-major) position within the sample, so a
// sample's mask is the same whatever batch it sits in, however the global batch
// is split across ranks, and when a block is recomputed in backward. Kept
// elements are scaled by 1 / (1 - p) (inverted dropout, as torch.nn.Dropout).
//
// Callers that hold a part of a sample that is contiguous in its flattened
// elements (tensor parallelism: heads [h0, h1) of the (B, H, T, T) attention
// probabilities, or positions [t0, t1) of a (B, T, D) sequence shard) draw
// that part of the whole sample's mask (first_element h0*T*T, t0*D): ranks
// holding different parts draw distinct masks, and the parts together are
// the one-rank mask (docs/tp.md "Dropout").
#ifndef MTB_COMMON_NN_DROPOUT_H_
#define MTB_COMMON_NN_DROPOUT_H_

#include <cstdint>
#include <vector>

#include "ATen/core/Tensor.h"

namespace mtb {
namespace nn {

// Where in a block a dropout sits: the last word of its key.
enum class DropoutSite : int64_t {
  kAttentionProbabilities = 0,  // after the attention softmax
  kAttentionOutput = 1,         // the attention branch, before the residual add
  kMlpOutput = 2,               // the MLP branch, before the residual add
};

// The dropout settings of one forward pass. p == 0 (the default) disables
// dropout and makes Apply the identity.
struct CounterDropout {
  double p = 0.0;
  uint64_t seed = 0;
  // The optimizer step the forward pass belongs to (1-based in the trainer).
  int64_t step = 0;
  // (batch): the global sample index of each row of the tensors passed in.
  std::vector<int64_t> sample_indices;

  bool enabled() const { return p > 0.0; }

  // x: (batch, ...) with batch == sample_indices.size(). Returns x * mask /
  // (1 - p), differentiable in x; x itself when disabled.
  at::Tensor Apply(const at::Tensor& x, int64_t layer, DropoutSite site) const;

  // x: (batch, ...), each row elements [first_element, first_element +
  // x[0].numel()) of its sample's flattened whole (see the file comment).
  // Apply with that part of the whole sample's mask; x itself when disabled.
  at::Tensor ApplyToPart(const at::Tensor& x, int64_t first_element,
                         int64_t layer, DropoutSite site) const;
};

// The keep mask (kBool, shape `shape`, whose first dimension is the batch) for
// the given key words; see the file comment. p in [0, 1). Element e of row b
// is element first_element + e of sample b's whole mask (0: the whole
// sample, or its first part).
at::Tensor DropoutKeepMask(at::IntArrayRef shape,
                           const std::vector<int64_t>& sample_indices,
                           uint64_t seed, int64_t step, int64_t layer,
                           DropoutSite site, double p,
                           int64_t first_element = 0);

// x * keep / (1 - p): inverted dropout with a given keep mask (kBool, x's
// shape), differentiable in x. Apply uses it on DropoutKeepMask's mask; code
// holding part of a sample applies it to its slice of the whole mask.
at::Tensor ApplyDropoutMask(const at::Tensor& x, const at::Tensor& keep,
                            double p);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_DROPOUT_H_
