#include "planner/memory.h"

#include <algorithm>

#include "planner/strategy_traits.h"
#include "trainer/config/config_names.h"
#include "trainer/memory/memory_estimate.h"
#include "trainer/strategy/registry.h"

namespace mtb::planner {

TrainConfig TrainerConfigFor(const ModelSpec& model, const Layout& layout) {
  TrainConfig config;
  config.set_vocab_size(model.vocab_size());
  config.set_d_model(model.d_model());
  config.set_n_layers(model.n_layers());
  config.set_n_heads(model.n_heads());
  config.set_seq_len(model.seq_len());
  config.set_batch_size(layout.micro_batch());
  config.set_grad_accum(layout.micro_batches());
  config.set_activation_checkpointing(layout.activation_checkpointing());
  if (const absl::StatusOr<TrainConfig::Precision> precision =
          PrecisionFromName(layout.precision());
      precision.ok()) {
    config.set_precision(*precision);
  }
  // An unknown strategy stays at the default (ddp), as the grad_sync below.
  if (const absl::StatusOr<TrainConfig::Strategy> strategy =
          StrategyFromName(layout.strategy());
      strategy.ok()) {
    config.set_strategy(*strategy);
  }
  config.set_bucket_cap_mb(layout.bucket_cap_mb());
  const absl::StatusOr<StrategyKind> kind = ParseStrategy(layout.strategy());
  config.set_grad_sync(AutoGradSync(kind.ok() ? *kind : StrategyKind::kDdp));
  if (GathersParametersPerUnit(layout.strategy())) {
    config.set_fsdp_prefetch(layout.fsdp_prefetch());
    config.set_fsdp_keep_gathered_until_backward(!layout.fsdp_reshard_after_forward());
  }
  config.set_ddp_launch_after_backward(layout.ddp_launch_after_backward());
  return config;
}

int64_t RankParameters(const ModelSpec& model, const Layout& layout) {
  const TrainConfig config = TrainerConfigFor(model, layout);
  const int64_t root = GptRootUnitCount(config);
  const int64_t blocks = GptBlockUnitCount(config) * (model.n_layers() / std::max(1, layout.pp()));
  return (root + blocks) / std::max(1, layout.tp());
}

MemoryPrediction PredictMemory(const ModelSpec& model, const Layout& layout, int64_t capacity) {
  const TrainConfig config = TrainerConfigFor(model, layout);
  const absl::StatusOr<StrategyKind> kind = ParseStrategy(layout.strategy());
  const MemoryEstimate estimate =
      EstimateRankMemoryFor(config, layout.dp(), kind.ok() ? *kind : StrategyKind::kDdp);
  MemoryPrediction memory;
  if (layout.tp() == 1 && layout.pp() == 1) {
    memory.set_parameters(estimate.parameters());
    memory.set_gradients(estimate.gradients());
    memory.set_optimizer_state(estimate.optimizer_state());
    memory.set_activations(estimate.activations());
    memory.set_logits(estimate.logits());
    memory.set_collective_staging(estimate.collective_staging());
  } else {
    const double share = static_cast<double>(RankParameters(model, layout)) /
                         static_cast<double>(model.parameters());
    auto scaled = [share](int64_t bytes) {
      return static_cast<int64_t>(static_cast<double>(bytes) * share);
    };
    memory.set_parameters(scaled(estimate.parameters()));
    memory.set_gradients(scaled(estimate.gradients()));
    memory.set_optimizer_state(scaled(estimate.optimizer_state()));
    memory.set_collective_staging(scaled(estimate.collective_staging()));
    const double tp = layout.tp();
    const double tp_share = layout.sequence_parallel() ? 1.0 / tp : (4.0 + 12.0 / tp) / 16.0;
    const double per_stage = static_cast<double>(estimate.activations()) / layout.pp() * tp_share;
    const int in_flight = std::min(layout.micro_batches(), layout.pp());
    const double first_stage = per_stage * in_flight;
    const double logits = static_cast<double>(estimate.logits()) / tp;
    // The first stage holds the most activations, the last the logits.
    if (layout.pp() == 1) {
      memory.set_activations(static_cast<int64_t>(per_stage));
      memory.set_logits(static_cast<int64_t>(logits));
    } else if (first_stage >= per_stage + logits) {
      memory.set_activations(static_cast<int64_t>(first_stage));
    } else {
      memory.set_activations(static_cast<int64_t>(per_stage));
      memory.set_logits(static_cast<int64_t>(logits));
    }
  }
  memory.set_total(memory.parameters() + memory.gradients() + memory.optimizer_state() +
                   memory.activations() + memory.logits() + memory.collective_staging());
  memory.set_capacity(capacity);
  memory.set_fits(memory.total() <= capacity);
  return memory;
}

}  // namespace mtb::planner
