#include "trainer/tp/options.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace mtb::tp {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace

int TensorParallelSize(const TrainConfig& config) {
  return std::max(1, config.tp());
}

absl::Status ValidateTensorParallel(const TrainConfig& config) {
  const int tp = config.tp() == 0 ? 1 : config.tp();
  if (tp < 1) {
    return Invalid(absl::StrCat("--tp=", tp, " must be at least 1"));
  }
  if (config.sequence_parallel() && tp == 1) {
    return Invalid(
        "--sequence_parallel shards the sequence over the tensor-parallel "
        "group: it needs --tp > 1");
  }
  if (tp == 1) return absl::OkStatus();
  const struct {
    const char* what;
    int64_t size;
  } divided[] = {
      {"--n_heads", config.n_heads()},
      {"--vocab_size", config.vocab_size()},
      {"the MLP width 4 x --d_model", int64_t{4} * config.d_model()},
  };
  for (const auto& d : divided) {
    if (d.size % tp != 0) {
      return Invalid(absl::StrCat("--tp=", tp, " must divide ", d.what, " (",
                                  d.size,
                                  "): each rank holds an equal slice of it"));
    }
  }
  if (config.sequence_parallel() && config.seq_len() % tp != 0) {
    return Invalid(absl::StrCat("--sequence_parallel: --tp=", tp,
                                " must divide --seq_len (", config.seq_len(),
                                "): each rank holds an equal part of the "
                                "sequence"));
  }
  if (config.reduction() == TrainConfig::exact) {
    return Invalid(absl::StrCat(
        "--reduction=exact does not extend to --tp=", tp,
        ": the tensor-parallel all-reduces in forward and backward sum fp32 "
        "activations in an order-dependent way (docs/tp.md)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTensorParallelWorld(const TrainConfig& config,
                                         int world_size) {
  const int tp = TensorParallelSize(config);
  if (world_size % tp != 0) {
    return Invalid(absl::StrCat("--tp=", tp, " must divide the world size ",
                                world_size,
                                " (--nproc: world = dp x tp, tp innermost)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TestFault> ParseTestFault(absl::string_view text) {
  if (text.empty()) return TestFault::kNone;
  if (text == "row_parallel_unreduced") return TestFault::kRowParallelUnreduced;
  if (text == "layernorm_unsynced") return TestFault::kLayerNormUnsynced;
  if (text == "norm_double_counted") return TestFault::kNormDoubleCounted;
  if (text == "replicated_dropout_per_rank") {
    return TestFault::kReplicatedDropoutPerRank;
  }
  if (text == "sharded_dropout_shared") return TestFault::kShardedDropoutShared;
  return Invalid(absl::StrCat(
      "--testonly_tp_fault=", text,
      " is not one of row_parallel_unreduced, layernorm_unsynced, "
      "norm_double_counted, replicated_dropout_per_rank, "
      "sharded_dropout_shared"));
}

}  // namespace mtb::tp
