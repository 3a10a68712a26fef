#include "trainer/output/output.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer/config/config_names.h"
#include "trainer/strategy/registry.h"
#include "absl/strings/str_join.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/report/report.h"
#include "common/base/status.h"

namespace mtb {
namespace {

std::string MeanPlusMinus(const MeanStd& value, int significant = 4) {
  if (value.count() <= 1) return FormatSignificant(value.mean(), significant);
  return absl::StrCat(FormatSignificant(value.mean(), significant), " ± ",
                      FormatSignificant(value.std(), 2));
}

std::string Bytes(double bytes) { return FormatByteAmount(bytes); }

std::string PeakMemory(const TrainResult& result) {
  std::vector<std::string> parts;
  for (const RankMemory& memory : result.memory()) {
    if (!memory.counted()) continue;
    parts.push_back(absl::StrCat("rank ", memory.rank(), " ",
                                 Bytes(static_cast<double>(memory.peak_bytes()))));
  }
  if (parts.empty()) return "not counted (ranks as threads)";
  return absl::StrJoin(parts, ", ");
}

// Each rank process's VmHWM (everything it ever had resident), or "" when
// not read.
std::string ProcessHighWater(const TrainResult& result) {
  std::vector<std::string> parts;
  for (const RankMemory& memory : result.memory()) {
    if (memory.vm_hwm_bytes() <= 0) continue;
    parts.push_back(absl::StrCat(
        "rank ", memory.rank(), " ",
        Bytes(static_cast<double>(memory.vm_hwm_bytes())), " (",
        Bytes(static_cast<double>(memory.vm_rss_at_start_bytes())),
        " before the model)"));
  }
  return absl::StrJoin(parts, ", ");
}

// The registry entry of the result's strategy (ddp's for a result that
// names none).
const StrategyEntry& EntryOf(const TrainResult& result) {
  const absl::StatusOr<StrategyKind> kind =
      ParseStrategy(result.strategy().name());
  return EntryFor(kind.ok() ? *kind : StrategyKind::kDdp);
}

// One row per counted rank (rank 0 and the largest peak beyond 8 ranks):
// what it held at its peak (trainer/memory/memory_peak.h).
std::vector<std::vector<std::string>> MemoryAtPeakRows(
    const TrainResult& result) {
  std::vector<const RankMemory*> shown;
  const RankMemory* largest = nullptr;
  for (const RankMemory& memory : result.memory()) {
    if (!memory.counted()) continue;
    if (largest == nullptr || memory.peak_bytes() > largest->peak_bytes()) {
      largest = &memory;
    }
    if (result.memory_size() <= 8 || memory.rank() == 0) {
      shown.push_back(&memory);
    }
  }
  if (result.memory_size() > 8 && largest != nullptr &&
      largest->rank() != 0) {
    shown.push_back(largest);
  }
  std::vector<std::vector<std::string>> rows;
  for (const RankMemory* memory : shown) {
    const MemoryAtPeak& at = memory->at_peak();
    rows.push_back(
        {absl::StrCat("memory at peak, rank ", memory->rank()),
         absl::StrCat(Bytes(static_cast<double>(at.peak_bytes())), " at '",
                      at.where(), "' (step ", at.step(), "): parameters ",
                      Bytes(static_cast<double>(at.parameter_bytes())),
                      ", gradients ",
                      Bytes(static_cast<double>(at.gradient_bytes())),
                      ", AdamW ",
                      Bytes(static_cast<double>(at.optimizer_state_bytes())),
                      ", collective ",
                      Bytes(static_cast<double>(at.collective_bytes())),
                      ", unattributed ",
                      Bytes(static_cast<double>(at.unattributed_bytes())))});
  }
  if (!rows.empty()) {
    const MemoryEstimate& e = result.memory_estimate();
    rows.push_back(
        {"closed form / rank",
         absl::StrCat(result.strategy().name(), " ",
                      EntryOf(result).memory_label,
                      ": parameters ", Bytes(static_cast<double>(e.parameters())),
                      ", gradients ", Bytes(static_cast<double>(e.gradients())),
                      ", AdamW ", Bytes(static_cast<double>(e.optimizer_state())),
                      ", collective <= ",
                      Bytes(static_cast<double>(e.collective_staging())),
                      "; estimated activations + logits ",
                      Bytes(static_cast<double>(e.activations() + e.logits())))});
  }
  return rows;
}

}  // namespace

std::string RenderSummaryTable(const TrainResult& result) {
  const TrainSummary& s = result.summary();
  const TrainRun& first_run = result.runs(0);
  MarkdownTable table;
  table.headers = {"metric", "value"};
  table.align = {Align::kLeft, Align::kRight};
  table.rows = {
      {"runs x steps", absl::StrCat(result.runs_size(), " x ",
                                    result.config().steps())},
      {"parameters", absl::StrCat(result.model().parameter_count())},
      {"tokens / step", absl::StrCat(result.model().tokens_per_step())},
      {"first loss", FormatSignificant(first_run.first_loss(), 4)},
      {"final loss", MeanPlusMinus(s.final_loss())},
      // A fraction of the first loss (1 - final / first), not a loss value.
      {"loss drop (relative)",
       absl::StrCat(MeanPlusMinus(s.loss_drop_fraction(), 3))},
      {"tokens/s (timed steps)", MeanPlusMinus(s.tokens_per_second(), 3)},
      {"ms/step (timed steps)", MeanPlusMinus(s.step_ms(), 3)},
      {"model GFLOP/s", FormatSignificant(s.model_flops_per_second() / 1e9, 3)},
      {"MFU", absl::StrCat(
                  absl::StrFormat(
                      "%.1f%% of %s GFLOP/s (%s)", 100 * s.mfu(),
                      FormatSignificant(
                          result.peak_flops().job_flops_per_second() / 1e9, 3),
                      result.peak_flops().source() == "--peak_flops"
                          ? "--peak_flops"
                          : "measured"),
                  // Never a bare "400%": say the denominator is wrong.
                  s.mfu() <= 1 ? ""
                  : result.peak_flops().source() == "--peak_flops"
                      ? " EXCEEDS 100%: the peak is too low"
                      : " EXCEEDS 100% of the measured peak: a bug of the probe",
                  s.blas_mfu() > 0
                      ? absl::StrFormat(
                            "; BLAS-only %.1f%% of %s", 100 * s.blas_mfu(),
                            FormatSignificant(result.peak_flops()
                                                      .blas_job_flops_per_second() /
                                                  1e9,
                                              3))
                      : "")},
      {"comm wait ms/step", FormatSignificant(s.comm_wait_ms(), 3)},
      {"grad bytes sent/step (closed form)",
       absl::StrCat(Bytes(s.grad_bytes_sent_per_step()), " (",
                    Bytes(s.expected_grad_bytes_per_step()), ")")},
      {"peak memory", PeakMemory(result)},
  };
  for (std::vector<std::string>& row : MemoryAtPeakRows(result)) {
    table.rows.push_back(std::move(row));
  }
  if (const std::string high_water = ProcessHighWater(result);
      !high_water.empty()) {
    table.rows.push_back({"process VmHWM", high_water});
  }
  table.rows.push_back(
      {"memory estimate / rank",
       Bytes(static_cast<double>(result.memory_estimate().total()))});
  table.rows.push_back(
      {"wall s (run 1)", FormatSignificant(first_run.wall_seconds(), 3)});
  // Only a strategy that gathers parameters during the step (fsdp) has it.
  if (s.param_gather_in_flight_ms() > 0) {
    table.rows.push_back(
        {"param all-gather ms/step in flight (hidden)",
         absl::StrCat(FormatSignificant(s.param_gather_in_flight_ms(), 3), " (",
                      FormatSignificant(s.param_gather_hidden_ms(), 3), ")")});
  }
  return table.Render();
}

std::string RenderMarkdownReport(const TrainResult& result,
                                 const std::string& svg_file_name) {
  const TrainConfig& c = result.config();
  const RunContext& context = result.run_context();
  std::string out = "# trainer run\n\n";
  absl::StrAppend(
      &out, "GPT: vocab ", c.vocab_size(), ", d_model ", c.d_model(), ", ",
      c.n_layers(), " layers x ", c.n_heads(), " heads, context ", c.seq_len(),
      "; ", result.model().parameter_count(), " parameters, ",
      FormatSignificant(result.model().flops_per_token(), 3),
      " FLOPs/token (6N + 12LTD).\n\n");
  absl::StrAppend(&out, "Data `", c.data(), "`, strategy `", ConfigName(c.strategy()),
                  "` on ", context.world_size(), " rank(s) (backend ",
                  context.backend(), "), ", ConfigName(c.precision()),
                  ", batch ", c.batch_size(), " x grad_accum ",
                  c.grad_accum(), ", dropout ", c.dropout(), ", AdamW lr ",
                  c.lr(), " (", ConfigName(c.lr_schedule()), "), seed ", c.seed(),
                  ". Config fingerprint `",
                  result.config_fingerprint().substr(0, 16), "…`.\n\n");
  absl::StrAppend(&out, "Machine: ", context.cpu_model(), " (",
                  context.cpu_cores(), " cores), ",
                  context.intra_op_threads(), " intra-op thread(s), BLAS ",
                  context.blas_library(), ", LibTorch ",
                  context.libtorch_version(), ", build ", context.build_mode(),
                  ", git ", context.git_commit().substr(0, 12),
                  context.git_dirty() ? " (dirty)" : "", ".\n\n");
  absl::StrAppend(&out, "## Summary\n\n", RenderSummaryTable(result), "\n");
  absl::StrAppend(
      &out,
      "Tokens/s is global tokens / the slowest rank's step time. Gradient "
      "bytes are what rank 0 sent for gradient synchronisation, counted by "
      "the collective layer; the closed form is ",
      EntryOf(result).grad_bytes_label,
      " per step (n ranks; the exact per-rank pieces when n does not divide "
      "a bucket)",
      EntryOf(result).gather_bytes_label[0] == '\0'
          ? std::string()
          : absl::StrCat(", and for the parameter all-gathers ",
                         EntryOf(result).gather_bytes_label),
      ". Peak memory is LibTorch CPU tensor storage per rank "
      "(a counting allocator; process-global, so only ranks run as processes "
      "are counted); at the peak, the parameters, gradients, AdamW state and "
      "collective temporaries are the tensors the strategy held, walked, and "
      "unattributed is the rest (activations and their gradients, "
      "temporaries): docs/trainer.md \"Memory at the peak\". MFU: model "
      "FLOPs (6N + 12LTD per token) / the job's peak (",
      result.peak_flops().source(), ").\n\n");
  const StrategyInfo& strategy = result.strategy();
  absl::StrAppend(&out, "## Strategy\n\n", strategy.description(), "\n\n");
  if (strategy.buckets_size() > 0) {
    MarkdownTable buckets;
    buckets.headers = {"bucket", "parameters", "bytes", "first", "last"};
    buckets.align = {Align::kRight, Align::kRight, Align::kRight, Align::kLeft,
                     Align::kLeft};
    for (const BucketInfo& b : strategy.buckets()) {
      buckets.rows.push_back({absl::StrCat(b.index()),
                              absl::StrCat(b.parameters()),
                              absl::StrCat(b.bytes()), b.first_parameter(),
                              b.last_parameter()});
    }
    absl::StrAppend(&out, buckets.Render(), "\n");
  }
  if (result.pipeline_stages_size() > 0) {
    // docs/pipeline.md, "Memory".
    absl::StrAppend(
        &out, "## Pipeline stages\n\nActivations held per stage: micro-batches "
              "in flight (forward run, backward not yet) next to GPipe's bound m "
              "and 1F1B's min(p-stage, m); with one rank per process, the "
              "counting allocator's bytes for one micro-batch and at the most "
              "held (last step).\n\n");
    MarkdownTable stages;
    stages.headers = {"stage", "blocks", "parameters", "in flight (peak)",
                      "GPipe bound", "1F1B bound", "one micro-batch",
                      "activations at peak"};
    stages.align = {Align::kRight, Align::kLeft, Align::kRight, Align::kRight,
                    Align::kRight, Align::kRight, Align::kRight, Align::kRight};
    for (const PipelineStageMemory& s : result.pipeline_stages()) {
      const bool counted = s.micro_batch_activation_bytes() > 0;
      stages.rows.push_back(
          {absl::StrCat(s.stage()),
           absl::StrCat(s.first_block(), "..", s.end_block() - 1),
           absl::StrCat(s.owned_parameters()), absl::StrCat(s.peak_in_flight()),
           absl::StrCat(s.gpipe_bound()), absl::StrCat(s.one_f_one_b_bound()),
           counted ? Bytes(static_cast<double>(s.micro_batch_activation_bytes()))
                   : "not counted",
           counted ? Bytes(static_cast<double>(s.peak_activation_bytes()))
                   : "not counted"});
    }
    absl::StrAppend(&out, stages.Render(), "\n");
  }
  if (!svg_file_name.empty()) {
    absl::StrAppend(&out, "![loss curve](", svg_file_name, ")\n\n");
  }

  const TrainRun& run = result.runs(0);
  absl::StrAppend(&out, "## Steps (run 1)\n\n");
  MarkdownTable steps;
  steps.headers = {"step",         "loss",         "lr",
                   "grad norm",    "data ms",      "forward ms",
                   "backward ms",  "optimizer ms", "comm wait ms",
                   "step ms",      "tokens/s",     "grad bytes sent",
                   "closed form"};
  steps.align.assign(steps.headers.size(), Align::kRight);
  // At most ~40 rows: every k-th step plus the last.
  const int every = std::max(1, run.steps_size() / 40);
  for (int i = 0; i < run.steps_size(); ++i) {
    if (i % every != 0 && i != run.steps_size() - 1) continue;
    const StepRecord& s = run.steps(i);
    steps.rows.push_back(
        {absl::StrCat(s.step(), s.timed() ? "" : " (warm-up)"),
         absl::StrFormat("%.4f", s.loss()), absl::StrFormat("%.3e", s.lr()),
         absl::StrCat(FormatSignificant(s.grad_norm(), 3),
                      s.clipped() ? " (clipped)" : ""),
         FormatSignificant(s.data_ms(), 3),
         FormatSignificant(s.forward_ms(), 3),
         FormatSignificant(s.backward_ms(), 3),
         FormatSignificant(s.optimizer_ms(), 3),
         FormatSignificant(s.comm_wait_ms(), 3),
         FormatSignificant(s.step_ms(), 3),
         FormatSignificant(s.tokens_per_second(), 3),
         absl::StrCat(s.grad_bytes_sent()),
         absl::StrCat(s.expected_grad_bytes())});
  }
  absl::StrAppend(&out, steps.Render());
  return out;
}

std::string RenderLossCurveSvg(const TrainResult& result) {
  LinePlot plot;
  plot.title = absl::StrCat("trainer: loss (", result.config().data(), ")");
  plot.x_label = "optimizer step";
  plot.y_label = "training loss";
  plot.integer_x = true;
  for (const TrainRun& run : result.runs()) {
    PlotSeries series;
    series.name = absl::StrCat("run ", run.index() + 1);
    for (const StepRecord& step : run.steps()) {
      series.points.emplace_back(step.step(), step.loss());
    }
    plot.series.push_back(std::move(series));
  }
  return RenderSvg(plot);
}

absl::StatusOr<std::vector<std::string>> WriteTrainOutputs(
    const TrainResult& result, const std::string& json_path, bool markdown) {
  RETURN_IF_ERROR(WriteJsonFile(result, json_path));
  std::vector<std::string> lines;
  if (!markdown) return lines;
  const std::string svg_path = ReplaceExtension(json_path, "svg");
  ASSIGN_OR_RETURN(
      const std::string svg_kept,
      WriteCompanionFile(svg_path, json_path, RenderLossCurveSvg(result)));
  lines.push_back(svg_kept.empty() ? absl::StrCat("plot: ", svg_path)
                                   : svg_kept);
  const std::string md_path = ReplaceExtension(json_path, "md");
  ASSIGN_OR_RETURN(
      const std::string md_kept,
      WriteCompanionFile(
          md_path, json_path,
          RenderMarkdownReport(result,
                               svg_kept.empty() ? BaseName(svg_path) : "")));
  lines.push_back(md_kept.empty() ? absl::StrCat("report: ", md_path)
                                  : md_kept);
  return lines;
}

}  // namespace mtb
