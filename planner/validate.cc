#include "planner/validate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/base/stats.h"
#include "common/base/status.h"
#include "planner/model.h"
#include "planner/predict.h"
#include "planner/strategy_traits.h"
#include "trainer/bench/strategy_matrix.h"

namespace mtb::planner {
namespace {

// The matrix's name for a strategy -> the layout's switches.
bool LayoutForMatrixStrategy(const std::string& name, Layout* layout) {
  if (ParseStrategy(name).ok()) {
    layout->set_strategy(name);
  } else if (name == "fsdp_no_reshard") {
    layout->set_strategy("fsdp");
    layout->set_fsdp_reshard_after_forward(false);
  } else if (name == "fsdp_prefetch") {
    layout->set_strategy("fsdp");
    layout->set_fsdp_prefetch(true);
  } else {
    return false;
  }
  return true;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

double KendallTau(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::map<std::string, int> position;
  for (size_t i = 0; i < b.size(); ++i) position[b[i]] = static_cast<int>(i);
  int concordant = 0, discordant = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) {
      (position[a[i]] < position[a[j]] ? concordant : discordant)++;
    }
  }
  const int pairs = concordant + discordant;
  return pairs == 0 ? 1.0 : static_cast<double>(concordant - discordant) / pairs;
}

absl::StatusOr<ValidationResult> Validate(const StrategyMatrixResult& matrix,
                                          const Cluster& cluster) {
  ValidationResult result;
  *result.mutable_cluster() = cluster;
  *result.mutable_matrix_run_context() = matrix.run_context();
  std::vector<double> errors;
  double min_ratio = 1e300, max_ratio = 0;
  int skipped = 0, estimate_mismatches = 0;
  using Group = std::tuple<std::string, std::string, int>;
  std::map<Group, std::vector<const ValidationCell*>> groups;
  // A matrix with a row per GEMM backend (StrategyMatrixRow.gemm): the
  // planner models one machine speed, so it validates the first backend's
  // rows (--gemms' first; "" in matrices from before the backends).
  std::string gemm;
  for (const StrategyMatrixRow& row : matrix.rows()) {
    if (!row.gemm().empty()) {
      gemm = row.gemm();
      break;
    }
  }
  for (const StrategyMatrixRow& row : matrix.rows()) {
    Layout layout = DefaultLayout();
    if (row.gemm() != gemm || !LayoutForMatrixStrategy(row.strategy(), &layout)) {
      ++skipped;
      continue;
    }
    const StrategyMatrixModel* shape = nullptr;
    for (const StrategyMatrixModel& candidate : StrategyMatrixModels()) {
      if (candidate.name == row.model()) shape = &candidate;
    }
    if (shape == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the strategy matrix has a row of model \"", row.model(),
                       "\", which trainer/bench/strategy_matrix.h does not define"));
    }
    ASSIGN_OR_RETURN(const ModelSpec model,
                     ModelFromShape(shape->name, shape->vocab_size, shape->d_model, shape->n_layers,
                                    shape->n_heads, shape->seq_len));
    layout.set_dp(row.world_size());
    layout.set_micro_batch(kStrategyMatrixBatch);
    layout.set_precision(row.precision());
    ASSIGN_OR_RETURN(const Prediction prediction, Predict(model, layout, cluster));
    ValidationCell* cell = result.add_cells();
    cell->set_model(row.model());
    cell->set_precision(row.precision());
    cell->set_world_size(row.world_size());
    cell->set_strategy(row.strategy());
    cell->set_measured_step_ms(row.step_ms());
    cell->set_predicted_step_ms(prediction.step().step_s() * 1e3);
    cell->set_step_error((cell->predicted_step_ms() - row.step_ms()) / row.step_ms());
    cell->set_measured_peak_bytes(row.peak_memory_bytes());
    cell->set_predicted_memory_bytes(prediction.memory().total());
    if (row.memory_estimate_bytes() != prediction.memory().total()) {
      ++estimate_mismatches;
    }
    if (row.peak_memory_bytes() > 0) {
      cell->set_memory_ratio(static_cast<double>(prediction.memory().total()) /
                             static_cast<double>(row.peak_memory_bytes()));
      min_ratio = std::min(min_ratio, cell->memory_ratio());
      max_ratio = std::max(max_ratio, cell->memory_ratio());
    }
    cell->set_measured_comm_wait_ms(row.comm_wait_ms());
    cell->set_predicted_exposed_comm_ms(prediction.step().exposed_comm_s() * 1e3);
    cell->set_bottleneck(prediction.bottleneck());
    errors.push_back(std::abs(cell->step_error()));
  }
  if (result.cells_size() == 0) {
    return absl::InvalidArgumentError(
        "the strategy matrix has no row of ddp, zero1, zero2 or fsdp to "
        "validate against");
  }
  for (const ValidationCell& cell : result.cells()) {
    groups[{cell.model(), cell.precision(), cell.world_size()}].push_back(&cell);
  }
  for (auto& [group, cells] : groups) {
    if (cells.size() < 2) continue;
    RankingCheck* check = result.add_rankings();
    std::tie(*check->mutable_model(), *check->mutable_precision(), std::ignore) = group;
    check->set_world_size(std::get<2>(group));
    std::vector<const ValidationCell*> measured = cells, predicted = cells;
    std::stable_sort(measured.begin(), measured.end(), [](auto* x, auto* y) {
      return x->measured_step_ms() < y->measured_step_ms();
    });
    std::stable_sort(predicted.begin(), predicted.end(), [](auto* x, auto* y) {
      return x->predicted_step_ms() < y->predicted_step_ms();
    });
    std::vector<std::string> m_order, p_order;
    for (auto* c : measured) m_order.push_back(c->strategy());
    for (auto* c : predicted) p_order.push_back(c->strategy());
    *check->mutable_measured_order() = {m_order.begin(), m_order.end()};
    *check->mutable_predicted_order() = {p_order.begin(), p_order.end()};
    check->set_matches(m_order == p_order);
    check->set_kendall_tau(KendallTau(m_order, p_order));
  }
  result.set_median_abs_step_error(Median(errors));
  result.set_worst_abs_step_error(*std::max_element(errors.begin(), errors.end()));
  if (max_ratio > 0) {
    result.set_min_memory_ratio(min_ratio);
    result.set_max_memory_ratio(max_ratio);
  }
  result.add_notes(absl::StrCat(skipped,
                                " rows skipped (PyTorch peers, --reduction=exact variants and "
                                "GEMM backends after the first: not modelled)"));
  result.add_notes(
      absl::StrCat(estimate_mismatches, " of ", result.cells_size(),
                   " cells where the planner's memory differs from the matrix's "
                   "memory_estimate_bytes (trainer/memory/memory_estimate.h; 0 means one code "
                   "path)"));
  return result;
}

}  // namespace mtb::planner
