// The strategies --strategy names, one entry each: its name and one-line
// description, the strategy-scoped flags that apply to it, how it resolves
// --grad_sync=auto, its memory closed forms (the estimate made before a run
// and the bounds a run's peak is held to) with the label printed beside them,
// and its gradient and parameter byte closed forms with theirs. Everything
// that depends on which strategy runs reads it from here; nothing outside
// compares strategy names (trainer/strategy/registry_test.cc greps for it).
// Torch-free: config validation, the memory estimate and the report share it.
// The factories, which need LibTorch, are keyed by the same kind in
// trainer/strategy/factory.h. docs/design.md "Strategies" describes the
// contract a new entry meets.
#ifndef MTB_TRAINER_STRATEGY_REGISTRY_H_
#define MTB_TRAINER_STRATEGY_REGISTRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

// What the memory closed forms of one rank need (counts in elements unless
// named bytes).
struct MemoryInputs {
  int64_t parameters = 0;  // P
  int world_size = 1;      // N
  // The largest gradient bucket in bytes (estimate: --bucket_cap_mb capped
  // at the model; a run: its largest bucket).
  int64_t bucket_bytes = 0;
  // fsdp's units: the root (embeddings, final LayerNorm) and one block.
  int64_t root_unit = 0;
  int64_t block_unit = 0;
  int n_layers = 0;
  bool grad_sync_every = false;
  bool accumulates = false;  // --grad_accum > 1
  bool reshard_after_forward = true;
  bool prefetch = false;
};

// What one rank holds by the closed form, in bytes.
struct StateMemory {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t collective_staging = 0;
};

// The bounds a run's walked memory at its peak is held to
// (trainer/memory/memory_check.h), in bytes: the steady terms and what may be in
// flight on top of them.
struct HeldBounds {
  int64_t parameters = 0;
  int64_t parameters_in_flight = 0;
  int64_t gradients = 0;
  int64_t gradients_in_flight = 0;
  int64_t optimizer_state = 0;
  int64_t collective_bound = 0;
};

struct StrategyEntry {
  StrategyKind kind;
  const char* name;
  // One line for --help, errors and docs.
  const char* description;
  // The strategy-scoped flags (without "--") that do something under this
  // strategy. A flag that some entry lists and this one does not is refused
  // under this strategy (StrategyFlagsApply); a flag no entry lists is not
  // strategy-scoped and applies to all.
  std::vector<const char*> flags;
  // --grad_sync=auto resolves to this: "every" for zero2 and fsdp (a rank
  // never holds a full gradient across micro-batches), "last" otherwise.
  const char* auto_grad_sync;
  // The largest world size it runs on (0: any).
  int max_world_size;
  // The memory closed form's label ("16P", "8P + 8P/N", ...) and its terms.
  const char* memory_label;
  StateMemory (*estimate)(const MemoryInputs&);
  // A run's bounds, from its measured buckets (fsdp: its units, in
  // reduce-scatter order: the blocks, then the root).
  HeldBounds (*bounds)(const MemoryInputs&, const std::vector<int64_t>& buckets);
  // Gradient bytes one rank sends per synchronisation, and parameter bytes
  // per step for the sharded strategies' all-gather, when N divides every
  // bucket (the strategies count the exact per-rank pieces): the label and
  // the value for `bytes` of gradient (parameters) on `n` ranks.
  const char* grad_bytes_label;
  int64_t (*grad_bytes)(int n, int64_t bytes);
  const char* gather_bytes_label;  // "" when nothing is gathered
  int64_t (*gather_bytes)(int n, int64_t bytes);
  // Why it cannot run over a pipeline stage's data-parallel group (--pp > 1;
  // trainer/pipeline/), or "" when it can: the refusal's reason.
  const char* pipeline_refusal;
};

// Every entry, in the order help and errors list them.
const std::vector<StrategyEntry>& AllStrategyEntries();
const StrategyEntry& EntryFor(StrategyKind kind);
// kInvalidArgument "--strategy=<name> is not a strategy: use ..." otherwise.
absl::StatusOr<const StrategyEntry*> FindStrategy(absl::string_view name);

// Convenience over the entries.
std::vector<StrategyKind> AllStrategies();
std::string StrategyName(StrategyKind kind);
// "ddp, zero1, zero2, fsdp (or single, the one-rank reference)".
std::string StrategyChoices();
absl::StatusOr<StrategyKind> ParseStrategy(absl::string_view name);
std::string AutoGradSync(StrategyKind kind);

// kInvalidArgument, one line, for the first of `flags_set` (flag names
// without "--", as given on the command line) that is strategy-scoped and
// does not apply to `strategy`: "--bucket_cap_mb applies to --strategy=ddp,
// zero1 or zero2, not fsdp".
absl::Status StrategyFlagsApply(StrategyKind strategy,
                                const std::vector<std::string>& flags_set);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_REGISTRY_H_
