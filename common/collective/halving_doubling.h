// Internal to common/collective: Gloo's own reduce-scatter
// (gloo::ReduceScatterHalvingDoubling), which c10d 1.13 does not expose, run on
// a plain gloo context (process_group.h, CreateGlooContext).
#ifndef MTB_COMMON_COLLECTIVE_HALVING_DOUBLING_H_
#define MTB_COMMON_COLLECTIVE_HALVING_DOUBLING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "ATen/core/Tensor.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace mtb::collective {

enum class HalvingDoublingOp { kSum, kMax, kMin };

// float32, float64, int32, int64: the element types instantiated here.
bool HalvingDoublingSupports(at::ScalarType dtype);

// Reduces `buffer` (contiguous, sum(recv_elements) elements, the same layout on
// every rank) across the context's ranks and leaves this rank's block, the
// reduction of elements [recv_elements[0] + ... + recv_elements[r-1],
// +recv_elements[r]), in buffer's first recv_elements[r] elements. The rest
// of buffer is clobbered. Collective; throws what Gloo throws (timeouts
// included).
void HalvingDoublingReduceScatter(
    const std::shared_ptr<::gloo::Context>& context, const at::Tensor& buffer,
    const std::vector<int>& recv_elements, HalvingDoublingOp op);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_HALVING_DOUBLING_H_
