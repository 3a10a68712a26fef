// Internal to common/collective: gloo::allreduce with an algorithm of our
// choice (c10d 1.13 passes none, which is Gloo's ring), run on a plain gloo
// context (process_group.h, CreateGlooContext) — the way to Gloo's BCUBE.
#ifndef MTB_COMMON_COLLECTIVE_GLOO_ALLREDUCE_H_
#define MTB_COMMON_COLLECTIVE_GLOO_ALLREDUCE_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "ATen/core/Tensor.h"
#include "common/collective/halving_doubling.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace mtb::collective {

enum class GlooAllreduceAlgorithm { kRing, kBcube };

// float32, float64, int32, int64 (as HalvingDoublingSupports).
bool GlooAllreduceSupports(at::ScalarType dtype);

// Reduces `buffer` (contiguous, the same numel and dtype on every rank) in
// place across the context's ranks. `tag` must differ from any other gloo
// collective in flight on `context`. Collective; throws what Gloo throws
// (timeouts included).
void GlooAllreduce(const std::shared_ptr<::gloo::Context>& context,
                   const at::Tensor& buffer, GlooAllreduceAlgorithm algorithm,
                   HalvingDoublingOp op, uint32_t tag,
                   std::chrono::milliseconds timeout);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_GLOO_ALLREDUCE_H_
