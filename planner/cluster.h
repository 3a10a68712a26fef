// Cluster files (planner/cluster.proto): reading, the checks that name the
// missing or wrong field, and the look-ups the step model makes (the compute
// rate for a precision and width, the link fit for a collective, scope and
// size).
#ifndef MTB_PLANNER_CLUSTER_H_
#define MTB_PLANNER_CLUSTER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/cluster.pb.h"
#include "planner/cost_model.h"

namespace mtb::planner {

inline constexpr int kClusterSchemaVersion = 1;

// kInvalidArgument, one line naming the first field that is missing, not
// positive or without a source ("cluster.devices_per_node: missing (give
// {value, source})"), prefixed with `where` (the file).
absl::Status ValidateCluster(const Cluster& cluster, const std::string& where);

// ReadJsonFile + ValidateCluster. A file that does not parse is
// kInvalidArgument too (bad input, exit 2), naming the path.
absl::StatusOr<Cluster> ReadClusterFile(const std::string& path);

int TotalDevices(const Cluster& cluster);

// Model FLOP/s of one device at `precision` for a model `d_model` wide with
// `ranks_per_node` ranks on its node: the row of that precision with the
// nearest d_model (log scale; a d_model 0 row matches any), then the nearest
// ranks_per_node. `measured_ranks_per_node` (when not null) gets the row's
// (1 for a row that does not say). kInvalidArgument naming the precision
// when no row has it.
absl::StatusOr<double> FlopsRate(const Cluster& cluster, const std::string& precision, int d_model,
                                 int ranks_per_node = 1, int* measured_ranks_per_node = nullptr);
// The peak at `precision` (cluster.peak), the compute rate when none.
absl::StatusOr<double> PeakFlopsRate(const Cluster& cluster, const std::string& precision);

// The fit for `op` on `scope` ("intra" or "inter") covering `bytes` for a
// group of `world_size` ranks: the fits of that collective and scope (else
// of any collective on that scope), the one nearest in message size (0
// inside its range) plus in world size (log distance; a fit measured at 0
// ranks, or a `world_size` of 0, matches any). kInvalidArgument when the
// scope has no fit at all.
absl::StatusOr<LinkCost> LinkFor(const Cluster& cluster, Collective op, const std::string& scope,
                                 int64_t bytes, int world_size = 0);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_CLUSTER_H_
