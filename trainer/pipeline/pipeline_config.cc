#include "trainer/pipeline/pipeline_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "trainer/config/config_names.h"
#include "trainer/strategy/registry.h"

namespace mtb::pipeline {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::StatusOr<PipelineOptions> PipelineOptionsOf(const TrainConfig& config) {
  PipelineOptions options;
  options.stages = config.pp();
  options.micro_batches = config.pp_microbatches();
  absl::StatusOr<ScheduleKind> schedule = ParseScheduleKind(config.pp_schedule());
  if (!schedule.ok()) return schedule.status();
  options.schedule = *schedule;
  std::vector<int64_t> split;
  if (!config.pp_split().empty()) {
    absl::StatusOr<std::vector<int64_t>> parsed = ParseSplit(config.pp_split());
    if (!parsed.ok()) return parsed.status();
    split = *std::move(parsed);
  }
  absl::StatusOr<std::vector<StageBlocks>> partition = PartitionStages(
      GptPartSizes(config.vocab_size(), config.d_model(), config.n_layers(),
                   config.seq_len()),
      options.stages, split);
  if (!partition.ok()) return partition.status();
  options.partition = *std::move(partition);
  options.skip_tied_embedding_sum =
      config.testonly_pp_skip_tied_embedding_sum();
  return options;
}

absl::Status ValidatePipelineConfig(const TrainConfig& c) {
  if (!IsPipelined(c)) {
    if (c.pp() < 0) {
      return Invalid(absl::StrCat("--pp=", c.pp(), " must be at least 1"));
    }
    if (!c.pp_split().empty()) {
      return Invalid(absl::StrCat("--pp_split=", c.pp_split(),
                                  " applies to pipelined runs only; add --pp > 1"));
    }
    if (c.testonly_pp_skip_tied_embedding_sum()) {
      return Invalid(
          "--testonly_pp_skip_tied_embedding_sum applies to pipelined runs "
          "only; add --pp > 1");
    }
    return absl::OkStatus();
  }
  // The dp axis runs --strategy over each stage's data-parallel group; an
  // entry that cannot says why (its registry trait).
  if (absl::StatusOr<const StrategyEntry*> entry = FindStrategy(ConfigName(c.strategy()));
      entry.ok() && (*entry)->pipeline_refusal[0] != '\0') {
    return Invalid(absl::StrCat("--strategy=", ConfigName(c.strategy()),
                                " is not supported with --pp=", c.pp(), ": ",
                                (*entry)->pipeline_refusal));
  }
  if (c.pp_microbatches() < 1) {
    return Invalid(absl::StrCat("--pp_microbatches=", c.pp_microbatches(),
                                " must be at least 1"));
  }
  absl::StatusOr<PipelineOptions> options = PipelineOptionsOf(c);
  if (!options.ok()) return options.status();
  if (c.batch_size() % c.pp_microbatches() != 0) {
    return Invalid(absl::StrCat(
        "--pp_microbatches=", c.pp_microbatches(), " must divide --batch_size=",
        c.batch_size(), " (every micro-batch holds the same number of samples)"));
  }
  if (c.grad_accum() != 1) {
    return Invalid(absl::StrCat("--grad_accum=", c.grad_accum(),
                                " with --pp=", c.pp(),
                                ": a pipelined step's micro-batches are "
                                "--pp_microbatches; leave --grad_accum at 1"));
  }
  if (c.reduction() == TrainConfig::exact) {
    return Invalid(absl::StrCat("--reduction=exact is not supported with --pp=",
                                c.pp()));
  }
  if (c.precision() != TrainConfig::fp32) {
    return Invalid(absl::StrCat("--precision=", ConfigName(c.precision()),
                                " is not supported with --pp=", c.pp(),
                                " (fp32 only)"));
  }
  if (c.activation_checkpointing()) {
    return Invalid(absl::StrCat(
        "--activation_checkpointing is not supported with --pp=", c.pp()));
  }
  if (c.repeat() != 1) {
    return Invalid(absl::StrCat("--repeat=", c.repeat(),
                                " is not supported with --pp=", c.pp()));
  }
  return absl::OkStatus();
}

absl::Status ValidatePipelineWorldSize(const TrainConfig& config,
                                       int world_size) {
  if (!IsPipelined(config)) return absl::OkStatus();
  const int tp = std::max(1, config.tp());
  const int model_parallel = config.pp() * tp;
  if (world_size % model_parallel == 0) return absl::OkStatus();
  if (tp == 1) {
    return Invalid(absl::StrCat(
        "--pp=", config.pp(), " must divide the world size ", world_size,
        " (world = pp x dp): use --nproc=", config.pp(), " or a multiple"));
  }
  return Invalid(absl::StrCat(
      "--pp=", config.pp(), " x --tp=", tp, " must divide the world size ",
      world_size, " (world = pp x dp x tp): use --nproc=", model_parallel,
      " or a multiple"));
}

}  // namespace mtb::pipeline
