// `planner search`: every layout of a model on a cluster's devices (dp x tp x
// pp dividing the world, each strategy, micro-batch sizes dividing the
// global batch, with and without activation checkpointing), predicted, kept
// when it fits memory, ranked by tokens/s.
#ifndef MTB_PLANNER_SEARCH_H_
#define MTB_PLANNER_SEARCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/cluster.pb.h"
#include "planner/planner.pb.h"

namespace mtb::planner {

struct SearchOptions {
  ModelSpec model;
  int64_t global_batch = 0;  // samples per optimizer step
  std::string precision = "fp32";
  int world_size = 0;  // 0: every device of the cluster
  int top = 5;         // predictions kept, best first
  // Bytes per gradient element the data-parallel collectives move.
  int gradient_bytes = 4;
};

// kInvalidArgument naming the rule for a global batch no layout divides,
// or for a model that fits nowhere ("... fits no layout: the smallest needs
// X per rank, the devices hold Y").
absl::StatusOr<PlannerResult> Search(const SearchOptions& options, const Cluster& cluster);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_SEARCH_H_
