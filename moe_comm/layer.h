// The expert-parallel MoE layer (docs/moe_comm.md): experts in
// contiguous blocks per rank (rank r holds experts [r·E/n, (r+1)·E/n)), the
// router replicated. Per call, on every rank:
//
//   route (common/nn/moe.h) -> capacity per expert for this source rank ->
//   one all-reduce of the routing statistics (aux and z losses over the global
//   batch) -> pack the kept assignments grouped by destination rank, then by
//   expert within a rank, then by (token, slot) -> all-to-all of the
//   per-expert counts -> dispatch all_to_allv -> each local expert's MLP on
//   its rows (source rank order) -> combine all_to_allv (the reverse counts)
//   -> un-permute -> gate-weighted sum over the top-k.
//
// Dispatch and combine are nn::AllToAllVWithGrad, so backward runs the
// reverse all-to-alls and the layer trains: expert gradients arrive whole on
// the expert's rank; the router weight's gradient on each rank covers that
// rank's tokens only (the caller all-reduces it, as data parallelism would).
#ifndef MTB_MOE_COMM_LAYER_H_
#define MTB_MOE_COMM_LAYER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "common/nn/moe.h"

namespace mtb::moe_comm {

// How the send buffer is ordered. Only the first is right: counts are
// exchanged per destination rank, so a destination's rows must be
// contiguous. The second is the classic bug (rows in local-expert-major order
// across destinations, so rank p receives other ranks' rows); it exists so a
// test can prove the check catches it.
enum class PackingOrder {
  kDestinationThenExpert,
  kExpertThenDestination,  // test hook: wrong on purpose
};

// Told the name of each of the layer's communication phases as it starts:
// "dispatch", then "combine" (where --fault acts and the flight recorder's
// position is set).
using PhaseHook = std::function<void(const char* phase)>;

struct LayerOptions {
  int num_experts = 0;  // E, divisible by the world size
  int top_k = 1;        // 1 or 2
  double capacity_factor = 1.25;
  PackingOrder packing = PackingOrder::kDestinationThenExpert;
  PhaseHook before_phase;  // may be empty
};

// What one call did, for tests and the benchmark (all on this rank).
struct LayerTrace {
  int64_t capacity = 0;          // per expert, from this rank
  std::vector<int64_t> send_counts;  // dispatch rows to each rank
  std::vector<int64_t> recv_counts;  // dispatch rows from each rank
  at::Tensor recv_counts_by_expert;  // (n, E/n) int64: [source][local expert]
  at::Tensor dispatched;         // (sum(recv_counts), D) received rows, detached
  double dispatch_seconds = 0;   // wall time of the dispatch all_to_allv
  double combine_seconds = 0;    // and of the combine all_to_allv
  double expert_seconds = 0;     // this rank's experts' MLPs (between them)
  at::Tensor global_counts;      // (E) float: assignments per expert, all ranks,
                                 // before capacity
  int64_t global_assignments = 0;  // T * k
  int64_t global_dropped = 0;      // over all ranks
};

struct LayerOutput {
  at::Tensor out;       // (N, D)
  at::Tensor aux_loss;  // (), the same value on every rank
  at::Tensor z_loss;    // ()
  LayerTrace trace;
};

// x: (N, D), every rank the same N. params: router (E, D) whole, experts this
// rank's block (E/n, ...). Collective: every rank calls it with the same
// options and N. kInvalidArgument for inconsistent shapes; communication
// failures as the communicator reports them.
absl::StatusOr<LayerOutput> ExpertParallelMoe(const nn::MoeParams& params,
                                              const at::Tensor& x,
                                              const LayerOptions& options,
                                              collective::Communicator& comm);

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_LAYER_H_
