// Internal to common/collective: collectives built from c10d send/recv on views
// of the caller's tensors (no full-size temporary), each run on a thread of its
// own so that the Communicator's Async contract holds.
//
// Vocabulary. A *block* is the part of a flat tensor that belongs to one rank
// (block p: rank p's contribution to an all-gather, or the elements reduced
// onto rank p by a reduce-scatter). A *chunk* is a piece of a block moved in
// one *step*; chunk c of a block is its elements [c*chunk, (c+1)*chunk). The
// *staging* buffers are where received chunks wait to be reduced: two *slots*
// (step c uses slot c % 2) of n-1 chunks each, plus one *accumulator* chunk.
#ifndef MTB_COMMON_COLLECTIVE_POINT_TO_POINT_COLLECTIVES_H_
#define MTB_COMMON_COLLECTIVE_POINT_TO_POINT_COLLECTIVES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "ATen/core/Tensor.h"
#include "common/collective/communicator.h"
#include "common/collective/process_group.h"

namespace mtb::collective {

// A c10d work that runs `body` on a new thread and completes when it returns
// (or fails with what it throws). Its future completes first, so the record's
// transfer-done instant is the body's end.
c10::intrusive_ptr<c10d::Work> RunInBackground(std::function<void()> body);

// Reduce-scatter of `flat_input` (1-D, contiguous, sum(block_elements)
// elements laid out block after block) into `result` (1-D, contiguous,
// block_elements[rank] elements). Moves `chunk_elements` (> 0) of each block
// per step with send/recv tagged `tag`; step c+1's messages are in flight
// while step c is reduced. The reduction runs in rank order 0..n-1 (the same
// bits on every rank and as the alltoall algorithm). `result` may alias this
// rank's block of `flat_input`. Allocates (2 (n-1) + 1) * chunk elements of
// staging, at most. Collective over `group`; throws what c10d throws.
void ChunkedReduceScatter(GlooProcessGroup& group, int rank,
                          const at::Tensor& flat_input,
                          const std::vector<int64_t>& block_elements,
                          const at::Tensor& result, int64_t chunk_elements,
                          ReduceOp op, int tag);

// All-gather with equal blocks: `flat_output` (1-D, contiguous, n * k
// elements) receives rank p's `flat_input` (1-D, contiguous, k elements) at
// [p*k, (p+1)*k). The input is sent to every peer at once and every peer's
// block is received into its view of the output. `flat_input` may be this
// rank's block of `flat_output`. Collective; throws what c10d throws.
void DirectAllGather(GlooProcessGroup& group, int rank, int world_size,
                     const at::Tensor& flat_input,
                     const at::Tensor& flat_output, int tag);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_POINT_TO_POINT_COLLECTIVES_H_
