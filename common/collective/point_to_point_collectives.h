// Internal to common/collective: collectives built from c10d send/recv on views
// of the caller's tensors (no full-size temporary), each run on a thread of its
// own so that the Communicator's Async contract holds.
//
// Vocabulary. A *block* is the part of a flat tensor that belongs to one rank
// (block p: rank p's contribution to an all-gather, or the elements reduced
// onto rank p by a reduce-scatter). A *chunk* is a piece of a block moved in
// one *step*; chunk c of a block is its elements [c*chunk, (c+1)*chunk). The
// *staging* buffers are where received chunks wait to be reduced: `depth`
// *slots* (step c uses slot c % depth) of n-1 chunks each.
#ifndef MTB_COMMON_COLLECTIVE_POINT_TO_POINT_COLLECTIVES_H_
#define MTB_COMMON_COLLECTIVE_POINT_TO_POINT_COLLECTIVES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/collective/process_group.h"

namespace mtb::collective {

// A c10d work that runs `body` on a new thread and completes when it returns
// (or fails with what it throws). Its future completes first, so the record's
// transfer-done instant is the body's end.
c10::intrusive_ptr<c10d::Work> RunInBackground(std::function<void()> body);

// One thread that runs bodies in the order they were handed over, each as a
// c10d work like RunInBackground's: for transports whose steps must follow the
// collectives' issue order (the shared-memory one). The destructor runs what
// is queued, then joins.
class SerialWorker {
 public:
  SerialWorker();
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  c10::intrusive_ptr<c10d::Work> Run(std::function<void()> body);

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// Where a chunked reduce-scatter's thread spent its time (sums of the
// steps): blocked until a step's chunks had arrived, combining them, blocked
// until the step's sent chunks had left this rank.
struct ReduceScatterPhases {
  absl::Duration receive_wait;
  absl::Duration reduce;
  absl::Duration send_wait;
};

// Reduce-scatter of `flat_input` (1-D, contiguous, sum(block_elements)
// elements laid out block after block) into `result` (1-D, contiguous,
// block_elements[rank] elements). Moves `chunk_elements` (> 0) of each block
// per step with send/recv tagged `tag`. Every send is posted at once (they
// leave as the peers post their receives). Out of place, one peer's chunks
// (rank 0's; rank 1's on rank 0) are received straight into `result`, all
// posted at once; every other peer's go through staging with `depth` (> 0)
// steps in flight: steps c+1 .. c+depth-1 move while step c is reduced. The
// reduction runs in rank order 0..n-1 (the same bits on every rank and as the
// alltoall algorithm), one pass per contribution into `result` or a staging
// chunk, no copy. `result` may alias this rank's block of `flat_input` (in
// place). Staging: depth (n-1) chunks in place, depth (n-2) out of place (none
// at 2 ranks). Fills `phases` when not null. Collective over `group`; throws
// what c10d throws.
void ChunkedReduceScatter(GlooProcessGroup& group, int rank,
                          const at::Tensor& flat_input,
                          const std::vector<int64_t>& block_elements,
                          const at::Tensor& result, int64_t chunk_elements,
                          int depth, ReduceOp op, int tag,
                          ReduceScatterPhases* phases = nullptr);

// All-gather: `flat_output` (1-D, contiguous, sum(block_elements) elements,
// block after block) receives rank p's `flat_input` (1-D, contiguous,
// block_elements[p] elements on rank p) as its block p. The input is sent to
// every peer at once and every peer's block is received into its view of the
// output. `flat_input` may be this rank's block of `flat_output`. Collective;
// throws what c10d throws.
void DirectAllGather(GlooProcessGroup& group, int rank,
                     const at::Tensor& flat_input,
                     const at::Tensor& flat_output,
                     const std::vector<int64_t>& block_elements, int tag);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_POINT_TO_POINT_COLLECTIVES_H_
