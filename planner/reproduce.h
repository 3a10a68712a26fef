// `planner reproduce`: a published throughput table (planner.proto's
// PublishedTable) predicted row by row from a cluster file holding only the
// hardware figures the source states; each row's predicted against published
// per-device TFLOP/s, counted with the source's own FLOPs formula.
#ifndef MTB_PLANNER_REPRODUCE_H_
#define MTB_PLANNER_REPRODUCE_H_

#include "absl/status/statusor.h"
#include "planner/cluster.pb.h"
#include "planner/planner.pb.h"

namespace mtb::planner {

// The FLOPs of one iteration as Narayanan et al. 2021 (eq. 3) count them,
// with activation recomputation: 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)).
double MegatronIterationFlops(const ModelSpec& model, int64_t global_batch);

// Every row twice: with the cluster as given (the stated peak), and with its
// compute rates scaled so that the first row matches its published figure
// (one calibration point; the others are predictions). kInvalidArgument
// for a table without rows, an unknown flops_formula (only
// "megatron_2021"), or a row whose layout does not divide its model or does
// not fit the cluster.
absl::StatusOr<ReproductionResult> Reproduce(const PublishedTable& table, const Cluster& cluster);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_REPRODUCE_H_
