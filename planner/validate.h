// `planner validate`: every cell of a strategy-matrix result
// (trainer/bench/strategy_matrix.proto) predicted from a cluster file and
// compared with what was measured: step time, peak memory, and the order of
// the strategies per (model, precision, world size).
#ifndef MTB_PLANNER_VALIDATE_H_
#define MTB_PLANNER_VALIDATE_H_

#include "absl/status/statusor.h"
#include "planner/cluster.pb.h"
#include "planner/planner.pb.h"
#include "trainer/bench/strategy_matrix.pb.h"

namespace mtb::planner {

// Our strategies' rows (ddp, zero1, zero2, fsdp, fsdp_no_reshard,
// fsdp_prefetch) as the matrix ran them (trainer/bench/strategy_matrix.h:
// batch 8 per rank, one micro-batch); the PyTorch peers and the exact
// variants are skipped (a note says so). kInvalidArgument when the matrix
// has none of ours, or a model the matrix does not define.
absl::StatusOr<ValidationResult> Validate(const StrategyMatrixResult& matrix,
                                          const Cluster& cluster);

// Kendall's tau between two orders of the same names (1: identical).
double KendallTau(const std::vector<std::string>& a, const std::vector<std::string>& b);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_VALIDATE_H_
