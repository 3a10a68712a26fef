#include "planner/reproduce.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "planner/model.h"
#include "planner/predict.h"

namespace mtb::planner {
namespace {

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Cluster ScaledCompute(const Cluster& cluster, double factor) {
  Cluster scaled = cluster;
  for (ComputeRate& rate : *scaled.mutable_compute()) {
    rate.mutable_flops_per_second()->set_value(rate.flops_per_second().value() * factor);
    rate.mutable_flops_per_second()->set_source(absl::StrCat(
        rate.flops_per_second().source(), " x ", factor, " (calibrated on the table's first row)"));
  }
  return scaled;
}

}  // namespace

double MegatronIterationFlops(const ModelSpec& model, int64_t global_batch) {
  const double b = static_cast<double>(global_batch), s = model.seq_len(), l = model.n_layers(),
               h = model.d_model(), v = model.vocab_size();
  return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

absl::StatusOr<ReproductionResult> Reproduce(const PublishedTable& table, const Cluster& cluster) {
  if (table.rows_size() == 0) {
    return absl::InvalidArgumentError("the published table has no rows");
  }
  if (table.flops_formula() != "megatron_2021") {
    return absl::InvalidArgumentError(absl::StrCat("flops_formula \"", table.flops_formula(),
                                                   "\" is not known: use megatron_2021"));
  }
  ReproductionResult result;
  *result.mutable_table() = table;
  *result.mutable_cluster() = cluster;
  struct Row {
    ModelSpec model;
    double flops;
    Prediction prediction;
  };
  std::vector<Row> rows;
  for (const PublishedRow& published : table.rows()) {
    const ModelSpec& m = published.model();
    ASSIGN_OR_RETURN(ModelSpec model, ModelFromShape(m.name(), m.vocab_size(), m.d_model(),
                                                     m.n_layers(), m.n_heads(), m.seq_len()));
    const Layout& layout = published.layout();
    const int64_t batch =
        static_cast<int64_t>(layout.dp()) * layout.micro_batch() * layout.micro_batches();
    if (batch != published.global_batch()) {
      return absl::InvalidArgumentError(
          absl::StrCat(published.label(), ": dp ", layout.dp(), " x micro_batch ",
                       layout.micro_batch(), " x micro_batches ", layout.micro_batches(), " = ",
                       batch, " is not the global batch ", published.global_batch()));
    }
    ASSIGN_OR_RETURN(Prediction prediction, Predict(model, layout, cluster));
    if (!prediction.memory().fits()) {
      return absl::InvalidArgumentError(absl::StrCat(
          published.label(), ": the layout needs ", prediction.memory().total(),
          " bytes per device, more than the cluster's ", prediction.memory().capacity()));
    }
    rows.push_back({model, MegatronIterationFlops(model, batch), prediction});
  }
  // The compute factor that makes row 0 match: its step is compute / x plus
  // the terms that do not scale with the rate (communication, optimizer).
  const StepBreakdown& first = rows[0].prediction.step();
  const int first_world = rows[0].prediction.world_size();
  const double target_s =
      rows[0].flops / (table.rows(0).published_tflops_per_device() * 1e12 * first_world);
  const double scaled_part = first.forward_s() + first.backward_s() + first.bubble_s();
  const double fixed_part = first.step_s() - scaled_part;
  if (target_s <= fixed_part) {
    return absl::InvalidArgumentError(
        "the first row's published figure is faster than its communication "
        "alone: the compute rate cannot be calibrated on it");
  }
  const double factor = scaled_part / (target_s - fixed_part);
  const Cluster calibrated = ScaledCompute(cluster, factor);
  const double peak = cluster.peak_size() > 0 ? cluster.peak(0).flops_per_second().value()
                                              : cluster.compute(0).flops_per_second().value();
  result.set_calibrated_fraction_of_peak(cluster.compute(0).flops_per_second().value() * factor /
                                         peak);
  std::vector<double> errors, calibrated_errors;
  for (size_t i = 0; i < rows.size(); ++i) {
    const PublishedRow& published = table.rows(static_cast<int>(i));
    const Prediction& prediction = rows[i].prediction;
    ASSIGN_OR_RETURN(const Prediction recalibrated,
                     Predict(rows[i].model, published.layout(), calibrated));
    const int world = prediction.world_size();
    ReproducedRow* row = result.add_rows();
    row->set_label(published.label());
    *row->mutable_layout() = published.layout();
    row->set_published_tflops_per_device(published.published_tflops_per_device());
    row->set_predicted_tflops_per_device(rows[i].flops / prediction.step().step_s() / world / 1e12);
    row->set_error(row->predicted_tflops_per_device() / published.published_tflops_per_device() -
                   1);
    row->set_calibrated_tflops_per_device(rows[i].flops / recalibrated.step().step_s() / world /
                                          1e12);
    row->set_calibrated_error(
        row->calibrated_tflops_per_device() / published.published_tflops_per_device() - 1);
    *row->mutable_step() = recalibrated.step();
    *row->mutable_memory() = recalibrated.memory();
    row->set_bottleneck(recalibrated.bottleneck());
    errors.push_back(std::abs(row->error()));
    if (i > 0) calibrated_errors.push_back(std::abs(row->calibrated_error()));
  }
  result.set_median_abs_error(Median(errors));
  result.set_worst_abs_error(*std::max_element(errors.begin(), errors.end()));
  if (!calibrated_errors.empty()) {
    result.set_median_abs_calibrated_error(Median(calibrated_errors));
    result.set_worst_abs_calibrated_error(
        *std::max_element(calibrated_errors.begin(), calibrated_errors.end()));
  }
  return result;
}

}  // namespace mtb::planner
