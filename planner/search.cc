#include "planner/search.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/report/report.h"
#include "planner/cluster.h"
#include "planner/predict.h"
#include "planner/strategy_traits.h"

namespace mtb::planner {

absl::StatusOr<PlannerResult> Search(const SearchOptions& options, const Cluster& cluster) {
  const int world = options.world_size > 0 ? options.world_size : TotalDevices(cluster);
  if (options.global_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--global_batch=", options.global_batch, " must be positive"));
  }
  PlannerResult result;
  result.set_command("search");
  *result.mutable_model() = options.model;
  result.set_cluster_name(cluster.name());
  result.set_global_batch(options.global_batch);
  std::vector<Prediction> fitting;
  int64_t smallest = std::numeric_limits<int64_t>::max();
  int considered = 0;
  const int per_node = static_cast<int>(cluster.devices_per_node().value());
  for (int tp = 1; tp <= std::min(world, per_node); ++tp) {
    if (world % tp != 0) continue;
    for (int pp = 1; pp <= world / tp; ++pp) {
      if ((world / tp) % pp != 0) continue;
      const int dp = world / tp / pp;
      for (int64_t micro_batch = 1; micro_batch <= options.global_batch; micro_batch *= 2) {
        if (options.global_batch % (dp * micro_batch) != 0) continue;
        const int64_t m = options.global_batch / (dp * micro_batch);
        for (const char* strategy : {"ddp", "zero1", "zero2", "fsdp"}) {
          for (bool checkpointing : {false, true}) {
            Layout layout = DefaultLayout();
            layout.set_dp(dp);
            layout.set_tp(tp);
            layout.set_pp(pp);
            layout.set_strategy(strategy);
            layout.set_micro_batch(static_cast<int>(micro_batch));
            layout.set_micro_batches(static_cast<int>(m));
            layout.set_activation_checkpointing(checkpointing);
            layout.set_precision(options.precision);
            layout.set_fsdp_prefetch(FlagApplies(std::string(strategy), "fsdp_prefetch"));
            layout.set_sequence_parallel(tp > 1);
            layout.set_gradient_bytes(options.gradient_bytes);
            if (!ValidateLayout(options.model, layout, cluster).ok()) continue;
            ++considered;
            ASSIGN_OR_RETURN(Prediction prediction, Predict(options.model, layout, cluster));
            smallest = std::min(smallest, prediction.memory().total());
            if (prediction.memory().fits()) {
              fitting.push_back(std::move(prediction));
            }
          }
        }
      }
    }
  }
  if (considered == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no layout of ", world, " ranks divides --global_batch=", options.global_batch,
                     " and the model (n_layers ", options.model.n_layers(), ", n_heads ",
                     options.model.n_heads(), ")"));
  }
  if (fitting.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", options.model.name(), " (", options.model.parameters(),
                     " parameters) fits no layout of ", world, " ranks on ", cluster.name(),
                     ": the smallest of ", considered, " layouts needs ",
                     FormatByteAmount(static_cast<double>(smallest)), " per rank, a device holds ",
                     FormatByteAmount(cluster.device_memory_bytes().value())));
  }
  std::stable_sort(fitting.begin(), fitting.end(), [](const Prediction& a, const Prediction& b) {
    return a.tokens_per_second() > b.tokens_per_second();
  });
  for (const Prediction& prediction : fitting) {
    if (!prediction.trainer_command().empty()) {
      *result.mutable_best_trainer_layout() = prediction;
      break;
    }
  }
  result.set_layouts_considered(considered);
  result.set_layouts_fitting(static_cast<int>(fitting.size()));
  for (int i = 0; i < std::min<int>(options.top, fitting.size()); ++i) {
    *result.add_predictions() = fitting[i];
  }
  return result;
}

}  // namespace mtb::planner
