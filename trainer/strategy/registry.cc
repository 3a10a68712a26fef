#include "trainer/strategy/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace mtb {
namespace {

constexpr int64_t kFp32 = 4;

int64_t Shard(const MemoryInputs& in) {
  const int64_t n = std::max(1, in.world_size);
  return (in.parameters + n - 1) / n;  // rounded up to whole elements
}

int64_t LargestBucket(const std::vector<int64_t>& buckets) {
  int64_t largest = 0;
  for (int64_t bytes : buckets) largest = std::max(largest, bytes);
  return largest;
}

// A reduce-scatter's blocks: n x ceil(bucket elements / n).
int64_t ScatterBlocks(int64_t bucket, int n) { return bucket + kFp32 * n; }

// All-reduce (ring): 2(n-1)/n of the bytes; reduce-scatter and all-gather:
// (n-1)/n (common/collective/traffic.h).
int64_t AllReduceBytes(int n, int64_t bytes) { return 2 * (n - 1) * bytes / n; }
int64_t ScatterOrGatherBytes(int n, int64_t bytes) {
  return (n - 1) * bytes / n;
}
int64_t NoBytes(int, int64_t) { return 0; }

// ddp and single: everything replicated, 16P.
StateMemory ReplicatedEstimate(const MemoryInputs& in) {
  StateMemory m;
  m.parameters = kFp32 * in.parameters;
  m.gradients = kFp32 * in.parameters;
  m.optimizer_state = 2 * kFp32 * in.parameters;
  return m;
}
HeldBounds ReplicatedBounds(const MemoryInputs& in,
                            const std::vector<int64_t>&) {
  HeldBounds b;
  b.parameters = kFp32 * in.parameters;
  b.gradients = kFp32 * in.parameters;
  b.optimizer_state = 2 * kFp32 * in.parameters;
  return b;
}

StateMemory Zero1Estimate(const MemoryInputs& in) {
  StateMemory m;
  m.parameters = kFp32 * in.parameters;
  m.gradients = (in.parameters + (in.grad_sync_every ? Shard(in) : 0)) * kFp32;
  m.optimizer_state = 2 * Shard(in) * kFp32;
  // Two buckets' reduce-scatter blocks in flight, never more than the model.
  m.collective_staging =
      in.world_size > 1 ? std::min(2 * in.bucket_bytes, in.parameters * kFp32)
                        : 0;
  return m;
}
HeldBounds Zero1Bounds(const MemoryInputs& in,
                       const std::vector<int64_t>& buckets) {
  HeldBounds b;
  b.parameters = kFp32 * in.parameters;
  b.gradients = kFp32 * in.parameters;
  b.optimizer_state = 2 * kFp32 * Shard(in);
  b.collective_bound =
      in.world_size > 1
          ? 2 * ScatterBlocks(LargestBucket(buckets), in.world_size)
          : 0;
  return b;
}

StateMemory Zero2Estimate(const MemoryInputs& in) {
  StateMemory m;
  m.parameters = kFp32 * in.parameters;
  m.gradients =
      (Shard(in) + (!in.grad_sync_every && in.accumulates ? in.parameters : 0)) *
      kFp32;
  m.optimizer_state = 2 * Shard(in) * kFp32;
  // Two buckets' staging copies and reduce-scatter blocks in flight.
  m.collective_staging = std::min(2 * in.bucket_bytes, in.parameters * kFp32) *
                         (in.world_size > 1 ? 2 : 1);
  return m;
}
HeldBounds Zero2Bounds(const MemoryInputs& in,
                       const std::vector<int64_t>& buckets) {
  const int64_t bucket = LargestBucket(buckets);
  HeldBounds b;
  b.parameters = kFp32 * in.parameters;
  b.gradients = kFp32 * Shard(in);
  b.optimizer_state = 2 * kFp32 * Shard(in);
  b.gradients_in_flight = bucket;
  b.collective_bound =
      2 * bucket +
      (in.world_size > 1 ? 2 * ScatterBlocks(bucket, in.world_size) : 0);
  return b;
}

StateMemory FsdpEstimate(const MemoryInputs& in) {
  const int64_t prefetch = in.prefetch ? 1 : 0;
  const int64_t unit = in.block_unit;
  StateMemory m;
  // The root gathered for the whole step; a block gathered while it
  // computes, and the prefetched next one (reshard), or every block at the
  // end of the forward (no reshard).
  m.parameters = (Shard(in) + in.root_unit +
                  (in.reshard_after_forward ? (1 + prefetch) * unit
                                            : in.n_layers * unit)) *
                 kFp32;
  // The root's and the computing unit's full gradients before their
  // reduce-scatters; every unit's across micro-batches under last.
  m.gradients = (Shard(in) + (!in.grad_sync_every && in.accumulates
                                  ? in.parameters
                                  : in.root_unit + unit)) *
                kFp32;
  m.optimizer_state = 2 * Shard(in) * kFp32;
  // The previous unit's reduce-scatter in flight (its full gradient and the
  // received blocks) and, with prefetch, the gather in flight's replicated
  // input.
  m.collective_staging =
      in.world_size > 1 ? (2 + prefetch) * unit * kFp32 : 0;
  return m;
}
HeldBounds FsdpBounds(const MemoryInputs& in,
                      const std::vector<int64_t>& units) {
  // The units in reduce-scatter order: the blocks, then the root.
  const int64_t root = units.empty() ? 0 : units.back();
  int64_t unit = 0;
  int64_t all_blocks = 0;
  for (size_t u = 0; u + 1 < units.size(); ++u) {
    unit = std::max(unit, units[u]);
    all_blocks += units[u];
  }
  const int64_t prefetch = in.prefetch ? 1 : 0;
  HeldBounds b;
  b.parameters = kFp32 * Shard(in) + root;
  b.parameters_in_flight =
      in.reshard_after_forward ? (1 + prefetch) * unit : all_blocks;
  b.gradients = kFp32 * Shard(in);
  b.gradients_in_flight = root + 2 * unit;
  b.optimizer_state = 2 * kFp32 * Shard(in);
  b.collective_bound =
      in.world_size > 1 ? (2 + prefetch) * (unit + kFp32 * in.world_size) : 0;
  return b;
}

constexpr char kAllReduceLabel[] = "2(n-1)/n x gradient bytes x syncs";
constexpr char kScatterLabel[] = "(n-1)/n x gradient bytes x syncs";
constexpr char kGatherLabel[] = "(n-1)/n x parameter bytes";

}  // namespace

const std::vector<StrategyEntry>& AllStrategyEntries() {
  static const std::vector<StrategyEntry>* const kEntries =
      new std::vector<StrategyEntry>{
          {StrategyKind::kDdp, "ddp",
           "replicated parameters, bucketed gradient all-reduce overlapped "
           "with backward",
           {"bucket_cap_mb", "ddp_overlap"}, "last", 0, "16P",
           &ReplicatedEstimate, &ReplicatedBounds, kAllReduceLabel,
           &AllReduceBytes, "", &NoBytes, ""},
          {StrategyKind::kZero1, "zero1",
           "optimizer state sharded: gradient reduce-scatter, parameter "
           "all-gather",
           {"bucket_cap_mb"}, "last", 0, "8P + 8P/N", &Zero1Estimate,
           &Zero1Bounds, kScatterLabel, &ScatterOrGatherBytes, kGatherLabel,
           &ScatterOrGatherBytes, ""},
          {StrategyKind::kZero2, "zero2",
           "gradients sharded too: reduce-scatter per bucket during backward",
           {"bucket_cap_mb"}, "every", 0, "4P + 12P/N + buckets in flight",
           &Zero2Estimate, &Zero2Bounds, kScatterLabel, &ScatterOrGatherBytes,
           kGatherLabel, &ScatterOrGatherBytes, ""},
          {StrategyKind::kFsdp, "fsdp",
           "parameters sharded too: each block all-gathered for its forward "
           "and backward, its gradient reduce-scattered as its backward "
           "finishes",
           {"reshard_after_forward", "fsdp_prefetch"}, "every", 0,
           "16P/N + root and gathered units", &FsdpEstimate, &FsdpBounds,
           kScatterLabel, &ScatterOrGatherBytes, kGatherLabel,
           &ScatterOrGatherBytes,
           "a stage's forward and backward hold its blocks whole and do not "
           "call fsdp's per-unit gathers and frees; use ddp, zero1 or zero2"},
          {StrategyKind::kSingle, "single",
           "the one-rank reference: gradients used as computed, no buckets, "
           "no hooks",
           {}, "last", 1, "16P", &ReplicatedEstimate, &ReplicatedBounds, "0",
           &NoBytes, "", &NoBytes, ""},
      };
  return *kEntries;
}

const StrategyEntry& EntryFor(StrategyKind kind) {
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    if (entry.kind == kind) return entry;
  }
  LOG(FATAL) << "no registry entry for strategy " << static_cast<int>(kind);
}

absl::StatusOr<const StrategyEntry*> FindStrategy(absl::string_view name) {
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    if (name == entry.name) return &entry;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--strategy=", name, " is not a strategy: use ", StrategyChoices()));
}

std::vector<StrategyKind> AllStrategies() {
  std::vector<StrategyKind> kinds;
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    kinds.push_back(entry.kind);
  }
  return kinds;
}

std::string StrategyName(StrategyKind kind) { return EntryFor(kind).name; }

std::string StrategyChoices() {
  std::vector<std::string> names;
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    if (entry.kind != StrategyKind::kSingle) names.push_back(entry.name);
  }
  return absl::StrCat(absl::StrJoin(names, ", "),
                      " (or single, the one-rank reference)");
}

absl::StatusOr<StrategyKind> ParseStrategy(absl::string_view name) {
  absl::StatusOr<const StrategyEntry*> entry = FindStrategy(name);
  if (!entry.ok()) return entry.status();
  return (*entry)->kind;
}

std::string AutoGradSync(StrategyKind kind) {
  return EntryFor(kind).auto_grad_sync;
}

absl::Status StrategyFlagsApply(StrategyKind strategy,
                                const std::vector<std::string>& flags_set) {
  const StrategyEntry& chosen = EntryFor(strategy);
  for (const std::string& flag : flags_set) {
    std::vector<std::string> applies_to;
    bool applies = false;
    for (const StrategyEntry& entry : AllStrategyEntries()) {
      for (const char* scoped : entry.flags) {
        if (flag != scoped) continue;
        applies_to.push_back(entry.name);
        applies |= entry.kind == chosen.kind;
      }
    }
    if (applies_to.empty() || applies) continue;
    const std::string last = applies_to.back();
    applies_to.pop_back();
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " applies to --strategy=",
        applies_to.empty() ? last
                           : absl::StrCat(absl::StrJoin(applies_to, ", "),
                                          " or ", last),
        ", not ", chosen.name, ": it would do nothing"));
  }
  return absl::OkStatus();
}

}  // namespace mtb
