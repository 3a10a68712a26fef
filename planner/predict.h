// The model of one optimizer step of a layout on a cluster (docs/planner.md,
// "The model of a step"): compute from the model's FLOPs at the cluster's
// calibrated rate, the pipeline bubble, every collective costed with the
// cluster's fits (cost_model.h) and hidden as the trainer schedules it,
// the optimizer at the memory bandwidth, memory from the trainer's closed
// forms (memory.h).
#ifndef MTB_PLANNER_PREDICT_H_
#define MTB_PLANNER_PREDICT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/cluster.pb.h"
#include "planner/planner.pb.h"

namespace mtb::planner {

// AdamW per parameter per step: reads parameter, gradient, m, v and writes
// parameter, m, v (7 x 4 bytes), and the gradient norm reads the gradient
// again (4): 32 bytes of memory traffic.
inline constexpr double kOptimizerBytesPerParameter = 32;

// dp = tp = pp = 1, ddp, micro-batch 1, one micro-batch, fp32, fsdp
// resharding after forward, no prefetch, one pipeline chunk, fp32 gradients,
// 25 MB buckets.
Layout DefaultLayout();

// kInvalidArgument, one line naming the rule and its arithmetic, for a layout
// that cannot run: a degree below 1, an unknown strategy, more ranks than the
// cluster has devices (unless its ranks share devices), n_layers not
// divisible by pp x pipeline_chunks, n_heads or 4 d_model not divisible by tp.
absl::Status ValidateLayout(const ModelSpec& model, const Layout& layout, const Cluster& cluster);

// ValidateLayout, then the prediction. The cluster must have passed
// ValidateCluster.
absl::StatusOr<Prediction> Predict(const ModelSpec& model, const Layout& layout,
                                   const Cluster& cluster);

// The trainer's command line for a data-parallel layout (tp = pp = 1);
// empty otherwise (the trainer has no tensor or pipeline parallelism yet).
std::string TrainerCommand(const ModelSpec& model, const Layout& layout);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_PREDICT_H_
