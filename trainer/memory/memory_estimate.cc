#include "trainer/memory/memory_estimate.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/report/report.h"
#include "trainer/config/config_names.h"
#include "trainer/tp/options.h"

namespace mtb {
namespace {

constexpr int64_t kFp32 = 4;

}  // namespace

int64_t GptParameterCount(const TrainConfig& config) {
  const int64_t l = config.n_layers();
  // Per block: ln1, ln2 (2d each), c_attn (3d^2 + 3d), attn c_proj (d^2 + d),
  // c_fc (4d^2 + 4d), mlp c_proj (4d^2 + d); then ln_f.
  return GptRootUnitCount(config) + l * GptBlockUnitCount(config);
}

int64_t GptRootUnitCount(const TrainConfig& config) {
  const int64_t d = config.d_model();
  return config.vocab_size() * d + config.seq_len() * d + 2 * d;
}

int64_t GptBlockUnitCount(const TrainConfig& config) {
  const int64_t d = config.d_model();
  return 12 * d * d + 13 * d;
}

namespace {

// With --tp = n (docs/tp.md) a rank holds V/n rows of wte and the replicated
// wpe and ln_f; of a block, 1/n of the split matrices and their column
// biases (12 d^2 + 7 d) and the replicated LayerNorms and row-parallel
// biases (6 d). n = 1: the units above.
int64_t RankRootUnitCount(const TrainConfig& config) {
  const int64_t d = config.d_model();
  return config.vocab_size() * d / tp::TensorParallelSize(config) +
         config.seq_len() * d + 2 * d;
}

int64_t RankBlockUnitCount(const TrainConfig& config) {
  const int64_t d = config.d_model();
  return (12 * d * d + 7 * d) / tp::TensorParallelSize(config) + 6 * d;
}

}  // namespace

MemoryEstimate EstimateRankMemory(const TrainConfig& config, int world_size) {
  const absl::StatusOr<StrategyKind> kind = ParseStrategy(ConfigName(config.strategy()));
  return EstimateRankMemoryFor(config, world_size,
                               kind.ok() ? *kind : StrategyKind::kDdp);
}

MemoryEstimate EstimateRankMemoryFor(const TrainConfig& config, int world_size,
                                     StrategyKind strategy) {
  // Per tp rank: its parts of the parameters, sharded or replicated over
  // its dp group of world_size / tp ranks.
  const int64_t p =
      RankRootUnitCount(config) + config.n_layers() * RankBlockUnitCount(config);
  const int64_t n = std::max(1, world_size / tp::TensorParallelSize(config));
  const int64_t bucket_bytes = std::min<int64_t>(
      p * kFp32,
      std::max<int64_t>(1, static_cast<int64_t>(config.bucket_cap_mb() *
                                                (1 << 20))));
  const bool every = config.grad_sync() == "every";
  const bool accumulates = config.grad_accum() > 1;
  const int64_t b = config.batch_size();
  const int64_t t = config.seq_len();
  const int64_t d = config.d_model();
  const int64_t h = config.n_heads();
  const int64_t l = config.n_layers();
  const bool dropout = config.dropout() > 0;
  // With --tp = tp_n (docs/tp.md "Memory"; Korthikanti et al. 2022 §4.1):
  // what a tp rank computes on its heads or MLP columns is split, what the
  // residual stream carries is replicated, or split along the sequence
  // with SP.
  const int64_t tp_n = tp::TensorParallelSize(config);
  const int64_t sp_n = config.sequence_parallel() ? tp_n : 1;
  // Values autograd saves for one block's backward, per tp rank:
  //   on the residual stream (whole, or T/tp positions with SP): the
  //   LayerNorms' inputs and outputs (4 BTd) and, with dropout, the masks on
  //   the two residual branches (2 BTd);
  //   with SP, the all-gathered LayerNorm outputs the column-parallel layers
  //   read (2 BTd);
  //   on this rank's heads and MLP columns (1/tp): q/k/v (3 BTd), the
  //   attention output (BTd), the MLP's hidden pre- and post-GELU (8 BTd),
  //   the scores and their softmax (2 BhT^2) and, with dropout, the
  //   attention weights' mask (BhT^2), plus one BTd mask (the attention
  //   output's).
  // At tp = 1 the sum is the unsplit model's (16 + 3 dropout) BTd +
  // (2 + dropout) BhT^2.
  const int64_t btd = b * t * d;
  const int64_t block_values =
      (4 + (dropout ? 2 : 0)) * btd / sp_n + (sp_n > 1 ? 2 * btd : 0) +
      (12 + (dropout ? 1 : 0)) * btd / tp_n +
      (2 + (dropout ? 1 : 0)) * b * h * t * t / tp_n;
  // Checkpointing keeps each block's input (the residual stream).
  const int64_t kept_blocks_values =
      config.activation_checkpointing() ? l * btd / sp_n + block_values
                                        : l * block_values;
  MemoryInputs in;
  in.parameters = p;
  in.world_size = static_cast<int>(n);
  in.bucket_bytes = bucket_bytes;
  in.root_unit = RankRootUnitCount(config);
  in.block_unit = RankBlockUnitCount(config);
  in.n_layers = config.n_layers();
  in.grad_sync_every = every;
  in.accumulates = accumulates;
  in.reshard_after_forward = !config.fsdp_keep_gathered_until_backward();
  in.prefetch = config.fsdp_prefetch();
  const StateMemory state = EntryFor(strategy).estimate(in);
  MemoryEstimate estimate;
  estimate.set_parameters(state.parameters);
  estimate.set_gradients(state.gradients);
  estimate.set_optimizer_state(state.optimizer_state);
  estimate.set_collective_staging(state.collective_staging);
  // Embeddings' sum and the final LayerNorm (2 BTd; T/tp positions with SP)
  // beside the blocks.
  estimate.set_activations((kept_blocks_values + 2 * btd / sp_n) * kFp32);
  estimate.set_logits(3 * b * t * config.vocab_size() /
                      tp::TensorParallelSize(config) * kFp32);
  estimate.set_total(estimate.parameters() + estimate.gradients() +
                     estimate.optimizer_state() + estimate.activations() +
                     estimate.logits() + estimate.collective_staging());
  return estimate;
}

std::string RenderMemoryEstimates(const TrainConfig& config, int world_size) {
  MarkdownTable table;
  table.headers = {"strategy",     "parameters", "gradients",
                   "AdamW state",  "collective temporaries",
                   "activations",  "logits",     "total per rank"};
  table.align = {Align::kLeft};
  for (int i = 1; i < 8; ++i) table.align.push_back(Align::kRight);
  auto bytes = [](int64_t value) {
    return FormatByteAmount(static_cast<double>(value));
  };
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    if (entry.max_world_size > 0 && world_size > entry.max_world_size) {
      continue;
    }
    TrainConfig resolved = config;
    resolved.set_strategy(*StrategyFromName(entry.name));
    if (config.grad_sync() == "auto") {
      resolved.set_grad_sync(entry.auto_grad_sync);
    }
    const MemoryEstimate e =
        EstimateRankMemoryFor(resolved, world_size, entry.kind);
    table.rows.push_back(
        {absl::StrCat(entry.name, " (grad_sync ", resolved.grad_sync(), ") ",
                      entry.memory_label),
         bytes(e.parameters()), bytes(e.gradients()),
         bytes(e.optimizer_state()), bytes(e.collective_staging()),
         bytes(e.activations()), bytes(e.logits()), bytes(e.total())});
  }
  return absl::StrCat(
      "closed-form memory per rank (not measured): ", GptParameterCount(config),
      " parameters (fp32, AdamW fp32), ", world_size, " rank(s), batch ",
      config.batch_size(), " x seq ", config.seq_len(), ", grad_accum ",
      config.grad_accum(), ", bucket_cap_mb ", config.bucket_cap_mb(),
      config.activation_checkpointing() ? ", activation checkpointing" : "",
      "; fsdp ",
      config.fsdp_keep_gathered_until_backward() ? "without" : "with",
      " reshard_after_forward, prefetch ", config.fsdp_prefetch() ? "on" : "off",
      "\n", table.Render());
}

absl::Status CheckMemoryFits(const MemoryEstimate& estimate, int ranks_per_host,
                             const HostMemory& host, std::string* warning) {
  const double needed = static_cast<double>(estimate.total()) * ranks_per_host;
  std::vector<std::pair<int64_t, std::string>> terms = {
      {estimate.parameters() + estimate.gradients() +
           estimate.optimizer_state(),
       "parameters, gradients and AdamW state"},
      {estimate.activations(), "activations"},
      {estimate.logits(), "logits"},
      {estimate.collective_staging(), "collective temporaries"},
  };
  std::sort(terms.begin(), terms.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> parts;
  for (const auto& [bytes, what] : terms) {
    if (bytes > 0) {
      parts.push_back(
          absl::StrCat(what, " ", FormatByteAmount(static_cast<double>(bytes))));
    }
  }
  const std::string summary = absl::StrCat(
      "estimated ", FormatByteAmount(static_cast<double>(estimate.total())),
      " per rank x ", ranks_per_host, " rank(s) on this host = ",
      FormatByteAmount(needed), " (", absl::StrJoin(parts, ", "), ")");
  if (needed > static_cast<double>(host.total_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the run cannot fit in memory: ", summary, " exceeds this host's ",
        FormatByteAmount(static_cast<double>(host.total_bytes)), " (",
        host.source, "); lower --batch_size or --seq_len (activations, "
        "logits), --d_model, --n_layers or --vocab_size (everything), use "
        "--activation_checkpointing, or fewer ranks per host (--nproc)"));
  }
  if (warning != nullptr) {
    warning->clear();
    if (needed > static_cast<double>(host.available_bytes)) {
      *warning = absl::StrCat(
          summary, " is more than the ",
          FormatByteAmount(static_cast<double>(host.available_bytes)),
          " available now (MemAvailable): the kernel may kill ranks");
    }
  }
  return absl::OkStatus();
}

}  // namespace mtb
