#include "planner/render.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/report/report.h"
#include "planner/strategy_traits.h"

namespace mtb::planner {
namespace {

std::string LayoutName(const Layout& l) {
  std::string name = absl::StrCat("dp", l.dp(), " tp", l.tp(), " pp", l.pp(), " ", l.strategy());
  const bool per_unit = GathersParametersPerUnit(l.strategy());
  if (per_unit && l.fsdp_prefetch()) absl::StrAppend(&name, "+prefetch");
  if (per_unit && !l.fsdp_reshard_after_forward()) {
    absl::StrAppend(&name, " no-reshard");
  }
  absl::StrAppend(&name, " b", l.micro_batch(), " m", l.micro_batches());
  if (l.activation_checkpointing()) absl::StrAppend(&name, " ckpt");
  if (l.tp() > 1 && l.sequence_parallel()) absl::StrAppend(&name, " sp");
  return name;
}

std::string Pct(double fraction) { return absl::StrFormat("%+.1f%%", 100 * fraction); }
std::string Ms(double seconds) { return FormatSignificant(seconds * 1e3, 3); }
std::string Bytes(double bytes) { return FormatByteAmount(bytes); }

}  // namespace

std::string RenderPlannerMarkdown(const PlannerResult& result) {
  std::string out =
      absl::StrCat("# planner ", result.command(), ": ", result.model().name(), " (",
                   result.model().parameters(), " parameters) on ", result.cluster_name(),
                   "\n\nglobal batch ", result.global_batch(), " x seq ", result.model().seq_len());
  if (result.command() == "search") {
    absl::StrAppend(&out, "; ", result.layouts_fitting(), " of ", result.layouts_considered(),
                    " layouts fit memory, the best first");
  }
  absl::StrAppend(&out, "\n\n");
  MarkdownTable table;
  table.headers = {"layout",    "tokens/s",        "MFU",
                   "step ms",   "exposed comm ms", "memory/rank (capacity)",
                   "bottleneck"};
  table.align = {Align::kLeft,  Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kRight, Align::kLeft};
  for (const Prediction& p : result.predictions()) {
    table.rows.push_back(
        {LayoutName(p.layout()), FormatSignificant(p.tokens_per_second(), 4),
         absl::StrFormat("%.1f%%", 100 * p.mfu()), Ms(p.step().step_s()),
         Ms(p.step().exposed_comm_s()),
         absl::StrCat(Bytes(p.memory().total()), " (", Bytes(p.memory().capacity()), ")"),
         p.bottleneck()});
  }
  absl::StrAppend(&out, table.Render());
  if (result.predictions_size() > 0 && !result.predictions(0).trainer_command().empty()) {
    absl::StrAppend(&out, "\nThe best layout on the trainer:\n\n    ",
                    result.predictions(0).trainer_command(), "\n");
  } else if (result.has_best_trainer_layout()) {
    const Prediction& best = result.best_trainer_layout();
    absl::StrAppend(&out,
                    "\nThe best layout uses tensor or pipeline parallelism, which "
                    "the trainer does not run yet; its best data-parallel layout (",
                    LayoutName(best.layout()), ", ", FormatSignificant(best.tokens_per_second(), 4),
                    " tokens/s):\n\n    ", best.trainer_command(), "\n");
  }
  return out;
}

std::string RenderClusterMarkdown(const Cluster& c) {
  std::string out =
      absl::StrCat("# cluster ", c.name(), "\n\n", c.nodes().value(), " node(s) x ",
                   c.devices_per_node().value(), " devices, ",
                   Bytes(c.device_memory_bytes().value()), " per device, optimizer bandwidth ",
                   FormatSignificant(c.memory_bandwidth_gbps().value(), 3), " GB/s\n\n");
  MarkdownTable compute;
  compute.headers = {"precision", "d_model", "model GFLOP/s", "source"};
  compute.align = {Align::kLeft, Align::kRight, Align::kRight, Align::kLeft};
  for (const ComputeRate& r : c.compute()) {
    compute.rows.push_back({r.precision(), absl::StrCat(r.d_model()),
                            FormatSignificant(r.flops_per_second().value() / 1e9, 4),
                            r.flops_per_second().source()});
  }
  MarkdownTable links;
  links.headers = {"collective",      "scope",           "transport", "ranks",
                   "S range (bytes)", "latency us/step", "bus GB/s"};
  links.align = {Align::kLeft,  Align::kLeft,  Align::kLeft, Align::kRight,
                 Align::kRight, Align::kRight, Align::kRight};
  for (const CollectiveFit& f : c.collectives()) {
    links.rows.push_back(
        {f.collective(), f.scope(), f.transport(), absl::StrCat(f.world_size()),
         absl::StrCat(f.min_bytes(), "..", f.max_bytes() == 0 ? "" : absl::StrCat(f.max_bytes())),
         FormatSignificant(f.latency_us().value(), 3),
         FormatSignificant(f.bandwidth_gbps().value(), 3)});
  }
  return absl::StrCat(out, compute.Render(), "\n", links.Render());
}

std::string RenderValidationMarkdown(const ValidationResult& r) {
  std::string out = absl::StrCat(
      "# planner validate: the strategy matrix predicted\n\n", "cluster ", r.cluster().name(), " (",
      r.cluster_file(), "); matrix ", r.matrix_file(), " measured ",
      r.matrix_run_context().start_time_utc(), " at ", r.matrix_run_context().git_commit(),
      "; load average now ", r.load_average(), "\n\n",
      absl::StrFormat("median |step error| %.1f%%, worst %.1f%%; predicted / "
                      "measured peak memory %.2f-%.2fx\n\n",
                      100 * r.median_abs_step_error(), 100 * r.worst_abs_step_error(),
                      r.min_memory_ratio(), r.max_memory_ratio()));
  MarkdownTable table;
  table.headers = {"model",
                   "precision",
                   "ranks",
                   "strategy",
                   "measured ms",
                   "predicted ms",
                   "error",
                   "comm wait ms (predicted exposed)",
                   "peak MiB (predicted)",
                   "ratio",
                   "bottleneck"};
  table.align = {Align::kLeft,  Align::kLeft,  Align::kRight, Align::kLeft,
                 Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kRight, Align::kLeft};
  for (const ValidationCell& c : r.cells()) {
    table.rows.push_back(
        {c.model(), c.precision(), absl::StrCat(c.world_size()), c.strategy(),
         FormatSignificant(c.measured_step_ms(), 4), FormatSignificant(c.predicted_step_ms(), 4),
         Pct(c.step_error()),
         absl::StrCat(FormatSignificant(c.measured_comm_wait_ms(), 3), " (",
                      FormatSignificant(c.predicted_exposed_comm_ms(), 3), ")"),
         absl::StrCat(FormatSignificant(c.measured_peak_bytes() / 1048576.0, 3), " (",
                      FormatSignificant(c.predicted_memory_bytes() / 1048576.0, 3), ")"),
         absl::StrFormat("%.2f", c.memory_ratio()), c.bottleneck()});
  }
  absl::StrAppend(&out, table.Render(), "\n## Strategy order by step time\n\n");
  MarkdownTable ranks;
  ranks.headers = {"model",     "precision", "ranks",      "measured (fastest first)",
                   "predicted", "match",     "Kendall tau"};
  ranks.align = {Align::kLeft, Align::kLeft, Align::kRight, Align::kLeft,
                 Align::kLeft, Align::kLeft, Align::kRight};
  for (const RankingCheck& k : r.rankings()) {
    ranks.rows.push_back({k.model(), k.precision(), absl::StrCat(k.world_size()),
                          absl::StrJoin(k.measured_order(), " < "),
                          absl::StrJoin(k.predicted_order(), " < "), k.matches() ? "yes" : "no",
                          absl::StrFormat("%.2f", k.kendall_tau())});
  }
  absl::StrAppend(&out, ranks.Render());
  if (r.notes_size() > 0) {
    absl::StrAppend(&out, "\n", absl::StrJoin(r.notes(), "\n\n"), "\n");
  }
  return out;
}

std::string RenderReproductionMarkdown(const ReproductionResult& r) {
  std::string out = absl::StrCat(
      "# planner reproduce: ", r.table().source(), "\n\ncluster ", r.cluster().name(), " (",
      r.cluster_file(), "), table ", r.table_file(), "\n\n",
      absl::StrFormat("Stated peak only: median |error| %.1f%%, worst %.1f%%. Compute "
                      "calibrated on the first row (%.1f%% of peak): median |error| "
                      "%.1f%%, worst %.1f%% over the other rows.\n\n",
                      100 * r.median_abs_error(), 100 * r.worst_abs_error(),
                      100 * r.calibrated_fraction_of_peak(), 100 * r.median_abs_calibrated_error(),
                      100 * r.worst_abs_calibrated_error()));
  MarkdownTable table;
  table.headers = {"model",
                   "layout",
                   "published TFLOP/s",
                   "predicted (peak)",
                   "error",
                   "predicted (calibrated)",
                   "error",
                   "bubble ms",
                   "exposed comm ms",
                   "memory/GPU",
                   "bottleneck"};
  table.align = {Align::kLeft,  Align::kLeft,  Align::kRight, Align::kRight,
                 Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kRight, Align::kLeft};
  for (const ReproducedRow& row : r.rows()) {
    table.rows.push_back({row.label(), LayoutName(row.layout()),
                          FormatSignificant(row.published_tflops_per_device(), 3),
                          FormatSignificant(row.predicted_tflops_per_device(), 3), Pct(row.error()),
                          FormatSignificant(row.calibrated_tflops_per_device(), 3),
                          Pct(row.calibrated_error()), Ms(row.step().bubble_s()),
                          Ms(row.step().exposed_comm_s()), Bytes(row.memory().total()),
                          row.bottleneck()});
  }
  absl::StrAppend(&out, table.Render());
  if (r.table().assumptions_size() > 0) {
    absl::StrAppend(&out, "\nAssumptions:\n\n");
    for (const std::string& a : r.table().assumptions()) {
      absl::StrAppend(&out, "- ", a, "\n");
    }
  }
  if (r.notes_size() > 0) {
    absl::StrAppend(&out, "\n", absl::StrJoin(r.notes(), "\n\n"), "\n");
  }
  return out;
}

}  // namespace mtb::planner
