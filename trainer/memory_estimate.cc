#include "trainer/memory_estimate.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/report/report.h"

namespace mtb {
namespace {

constexpr int64_t kFp32 = 4;

}  // namespace

int64_t GptParameterCount(const TrainConfig& config) {
  const int64_t v = config.vocab_size();
  const int64_t t = config.seq_len();
  const int64_t d = config.d_model();
  const int64_t l = config.n_layers();
  // Per block: ln1, ln2 (2d each), c_attn (3d^2 + 3d), attn c_proj (d^2 + d),
  // c_fc (4d^2 + 4d), mlp c_proj (4d^2 + d); then ln_f.
  return v * d + t * d + l * (12 * d * d + 13 * d) + 2 * d;
}

MemoryEstimate EstimateRankMemory(const TrainConfig& config, int world_size) {
  (void)world_size;  // replicated strategies: every rank holds everything
  const int64_t p = GptParameterCount(config);
  const int64_t b = config.batch_size();
  const int64_t t = config.seq_len();
  const int64_t d = config.d_model();
  const int64_t h = config.n_heads();
  const int64_t l = config.n_layers();
  const bool dropout = config.dropout() > 0;
  // Values autograd saves for one block's backward: LayerNorm inputs and
  // outputs (4 BTd), q/k/v (3 BTd), the attention output (BTd), the MLP's
  // hidden pre- and post-GELU (8 BTd); the scores and their softmax (2 BhT^2);
  // with dropout, its masks on the two residual branches and the attention
  // weights.
  const int64_t block_values = (16 + (dropout ? 3 : 0)) * b * t * d +
                               (2 + (dropout ? 1 : 0)) * b * h * t * t;
  const int64_t kept_blocks_values =
      config.activation_checkpointing() ? l * b * t * d + block_values
                                        : l * block_values;
  MemoryEstimate estimate;
  estimate.set_parameters(p * kFp32);
  estimate.set_gradients(p * kFp32);
  estimate.set_optimizer_state(2 * p * kFp32);
  // Embeddings' sum and the final LayerNorm (2 BTd) beside the blocks.
  estimate.set_activations((kept_blocks_values + 2 * b * t * d) * kFp32);
  estimate.set_logits(3 * b * t * config.vocab_size() * kFp32);
  estimate.set_collective_staging(config.strategy() == "ddp" ? p * kFp32 : 0);
  estimate.set_total(estimate.parameters() + estimate.gradients() +
                     estimate.optimizer_state() + estimate.activations() +
                     estimate.logits() + estimate.collective_staging());
  return estimate;
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
      {estimate.collective_staging(), "gradient buckets"},
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
