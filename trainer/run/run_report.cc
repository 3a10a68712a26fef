#include "trainer/run/run_report.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/libtorch/matmul_peak.h"
#include "common/report/report.h"
#include "glog/logging.h"
#include "trainer/config/config.h"
#include "google/protobuf/text_format.h"
#include "trainer/strategy/scalars.h"

namespace mtb {

// The resolved configuration as a two-column table, one row per flag.
std::string OptionsTable(const TrainConfig& config) {
  MarkdownTable table;
  table.headers = {"option", "value"};
  for (auto& [flag, value] : FlagValues(config)) {
    table.rows.push_back({flag, value});
  }
  return table.Render();
}

void LogStart(const TrainConfig& config, const RankInfo& rank,
              const Strategy& strategy, const DataSource& data,
              const GptModel& model, int64_t tokens_per_step) {
  if (rank.rank != 0) return;
  LOG(INFO) << "resolved options:\n" << OptionsTable(config);
  const ModelShape& s = model.shape();
  LOG(INFO) << absl::StrFormat(
      "model: GPT vocab %d, d_model %d, %d layers x %d heads, context %d | "
      "%d parameters | %.3g FLOPs/token (6N + 12LTD, N = %d)",
      s.vocab_size, s.d_model, s.n_layers, s.n_heads, s.seq_len,
      model.ParameterCount(), model.FlopsPerToken(),
      model.FlopsParameterCount());
  LOG(INFO) << absl::StrFormat(
      "run: strategy %s, %d rank(s), batch %d x grad_accum %d x seq %d = %d "
      "tokens/step, %s, dropout %g%s, %d steps x %d repeat(s)",
      strategy.name(), rank.world_size, config.batch_size(),
      config.grad_accum(), config.seq_len(), tokens_per_step,
      ConfigName(config.precision()), config.dropout(),
      config.activation_checkpointing() ? ", activation checkpointing" : "",
      config.steps(), config.repeat());
  const std::string schedule =
      config.lr_schedule() == TrainConfig::cosine
          ? absl::StrFormat("cosine to %g at step %d", config.min_lr(),
                            config.lr_decay_steps())
          : std::string("constant");
  LOG(INFO) << absl::StrFormat(
      "optimizer: AdamW lr %g (warm-up %d steps, then %s), betas (%g, %g), "
      "eps %g, weight decay %g, clip %g",
      config.lr(), config.lr_warmup_steps(), schedule, config.beta1(),
      config.beta2(), config.eps(), config.weight_decay(),
      config.max_grad_norm());
  LOG(INFO) << "data: " << data.Describe();
  LOG(INFO) << "strategy: " << strategy.Describe();
  const std::vector<BucketSummary> buckets = strategy.Buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    LOG(INFO) << absl::StrFormat("  bucket %d: %d parameters, %d bytes (%s .. %s)",
                                 b, buckets[b].parameters, buckets[b].bytes,
                                 buckets[b].first_parameter,
                                 buckets[b].last_parameter);
  }
}

// --peak_flops, or every rank measures every GEMM at once (they share the
// host's cores as in training); the job's peak is the sum over ranks of each
// rank's fastest.
absl::StatusOr<PeakFlops> JobPeakFlops(const TrainConfig& config,
                                       const RankInfo& rank,
                                       Strategy& strategy) {
  return JobPeakFlops(config, rank, strategy.communicator(), strategy.name());
}

absl::StatusOr<PeakFlops> JobPeakFlops(const TrainConfig& config,
                                       const RankInfo& rank,
                                       collective::Communicator* communicator,
                                       const std::string& who) {
  PeakFlops peak;
  if (config.peak_flops() > 0) {
    peak.set_rank_flops_per_second(config.peak_flops());
    peak.set_job_flops_per_second(config.peak_flops() * rank.world_size);
    peak.set_source("--peak_flops");
    return peak;
  }
  // Every GEMM library at the model's shapes and 1024^3; the fastest is the
  // peak, so no product the trainer runs can beat it (an MFU above 100% would
  // be a bug of this measurement).
  const std::vector<GemmSpeed> speeds = MeasureGemms(
      ConfigName(config.precision()),
      ModelGemmShapes(int64_t{config.batch_size()} * config.seq_len(),
                      config.d_model(), config.vocab_size()));
  const GemmSpeed* fastest = FastestGemm(speeds);
  const GemmSpeed* blas = FastestGemm(speeds, "blas");
  CHECK(fastest != nullptr);
  ASSIGN_OR_RETURN(const double job_flops,
                   ReduceScalarOverRanks(communicator, fastest->flops_per_second,
                                         ScalarReduction::kSum, who));
  ASSIGN_OR_RETURN(const double blas_job_flops,
                   ReduceScalarOverRanks(
                       communicator,
                       blas == nullptr ? 0.0 : blas->flops_per_second,
                       ScalarReduction::kSum, who));
  peak.set_rank_flops_per_second(job_flops / rank.world_size);
  peak.set_job_flops_per_second(job_flops);
  peak.set_blas_rank_flops_per_second(blas_job_flops / rank.world_size);
  peak.set_blas_job_flops_per_second(blas_job_flops);
  peak.set_source(absl::StrCat(
      "measured: fastest of ", speeds.size(), " GEMMs (", ConfigName(config.precision()),
      ", model shapes and 1024^3, best of 5): ", fastest->Describe(),
      ", on every rank at once (mean per rank)"));
  for (const GemmSpeed& speed : speeds) {
    GemmSpeedRecord* record = peak.add_gemms();
    record->set_library(speed.library);
    record->set_precision(speed.precision);
    record->set_m(speed.shape.m);
    record->set_n(speed.shape.n);
    record->set_k(speed.shape.k);
    record->set_flops_per_second(speed.flops_per_second);
  }
  if (rank.rank == 0) {
    LOG(INFO) << absl::StrFormat(
        "peak: %.1f GFLOP/s per rank, %.1f GFLOP/s for the job (%s)",
        peak.rank_flops_per_second() / 1e9, job_flops / 1e9, peak.source());
    for (const GemmSpeed& speed : speeds) {
      LOG(INFO) << absl::StrFormat("  gemm %s: %.1f GFLOP/s", speed.Describe(),
                                   speed.flops_per_second / 1e9);
    }
  }
  return peak;
}

void FillStrategyInfo(const Strategy& strategy, const GptModel& model,
                      StrategyInfo* info) {
  info->set_name(strategy.name());
  info->set_description(strategy.Describe());
  info->set_backend(strategy.backend());
  info->set_gradient_bytes(model.ParameterCount() * 4);
  const std::vector<BucketSummary> buckets = strategy.Buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    BucketInfo* bucket = info->add_buckets();
    bucket->set_index(static_cast<int32_t>(b));
    bucket->set_parameters(buckets[b].parameters);
    bucket->set_bytes(buckets[b].bytes);
    bucket->set_first_parameter(buckets[b].first_parameter);
    bucket->set_last_parameter(buckets[b].last_parameter);
  }
}

// Rank 0's line for a finished save.
void LogSave(const CheckpointSave& save, const RankInfo& rank) {
  if (rank.rank != 0) return;
  const std::string pruned =
      save.pruned().empty()
          ? ""
          : absl::StrCat("; pruned ", absl::StrJoin(save.pruned(), ", "));
  if (!save.async()) {
    LOG(INFO) << absl::StrFormat(
        "checkpoint %s: %s in %.0f ms (write %.0f, publish %.0f)%s", save.name(),
        FormatByteAmount(save.bytes()), save.blocking_ms(),
        save.write_seconds() * 1000, save.publish_seconds() * 1000, pruned);
    return;
  }
  LOG(INFO) << absl::StrFormat(
      "checkpoint %s: %s, training blocked %.1f ms (snapshot; %.1f ms waiting "
      "for the previous save), background %.0f ms (write %.0f, publish %.0f)%s",
      save.name(), FormatByteAmount(save.bytes()), save.blocking_ms(),
      save.wait_ms(), save.background_ms(), save.write_seconds() * 1000,
      save.publish_seconds() * 1000, pruned);
}

std::string NonFiniteMessage(int64_t step, int32_t steps,
                             const std::vector<int>& loss_ranks,
                             const std::vector<double>& losses,
                             bool norm_finite, double norm,
                             const std::string& note) {
  // NaN's sign is noise ("-nan"): print every NaN as "nan".
  auto format = [](double value) {
    return std::isnan(value) ? std::string("nan")
                             : absl::StrFormat("%g", value);
  };
  std::string message =
      absl::StrFormat("step %d of %d: ", step, steps);
  if (!loss_ranks.empty()) {
    std::vector<std::string> values;
    for (double value : losses) values.push_back(format(value));
    absl::StrAppend(&message, "the loss is not finite on ",
                    loss_ranks.size() == 1 ? "rank " : "ranks ",
                    absl::StrJoin(loss_ranks, ", "), " (",
                    absl::StrJoin(values, ", "), ")");
    if (!norm_finite) {
      absl::StrAppend(&message, " and the gradient norm (", format(norm),
                      ") is not finite");
    }
  } else {
    absl::StrAppend(&message, "the gradient norm (", format(norm),
                    ") is not finite (every rank's loss is finite)");
  }
  absl::StrAppend(&message, note);
  absl::StrAppend(&message,
                  "; every rank stopped before the optimizer update");
  return message;
}

}  // namespace mtb
