// The strategies --strategy names, in one place (issue 12 item 2): parsing
// with the list of choices, the canonical names, and what depends only on the
// strategy (the --grad_sync=auto resolution). Torch-free, so config, flags
// and the memory estimate share it.
#ifndef MTB_TRAINER_STRATEGY_NAME_H_
#define MTB_TRAINER_STRATEGY_NAME_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

enum class StrategyKind {
  kSingle,  // one rank, the reference
  kDdp,     // replicated everything, bucketed all-reduce
  kZero1,   // optimizer state sharded
  kZero2,   // gradients and optimizer state sharded
  kFsdp,    // parameters too, gathered per unit (ZeRO-3)
};

// Every strategy, in the order help and errors list them.
const std::vector<StrategyKind>& AllStrategies();
std::string StrategyName(StrategyKind kind);
// "ddp, zero1, zero2, fsdp (or single, the one-rank reference)".
std::string StrategyChoices();
// kInvalidArgument "--strategy=<name> is not a strategy: use ..." otherwise.
absl::StatusOr<StrategyKind> ParseStrategy(absl::string_view name);
// What --grad_sync=auto means (SPEC §4): "every" for zero2 and fsdp (so that
// a rank never holds a full gradient across micro-batches), "last"
// otherwise.
std::string AutoGradSync(StrategyKind kind);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_NAME_H_
