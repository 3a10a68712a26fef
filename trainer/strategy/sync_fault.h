// Test-only faults (--testonly_sync_fault): a deliberately broken gradient
// synchronisation or memory bound, so that tests can prove their checks
// catch one (trainer/tests/sync_fault_process_test.cc,
// trainer/tests/memory_process_test.cc). Every rank applies the same fault, so the
// ranks still issue the same collectives and nothing hangs. Never set
// outside tests.
#ifndef MTB_TRAINER_STRATEGY_SYNC_FAULT_H_
#define MTB_TRAINER_STRATEGY_SYNC_FAULT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/strategy/registry.h"

namespace mtb {

struct SyncTestFault {
  enum class Kind {
    kNone,
    // ddp, zero1, zero2: every bucket reduced with sum: n x the average.
    kSumNotAverage,
    // ddp, zero1, zero2: bucket `bucket` is never all-reduced or
    // reduce-scattered; each rank keeps its local gradients (its local shard).
    kBucketNeverSynced,
    // ddp: `parameter` keeps each rank's local gradient.
    kParameterUnreduced,
    // zero2: each bucket's full gradients stay alive until the next step
    // (the numbers do not change; the memory does).
    kKeepFullGradients,
    // fsdp: a gathered unit is never freed (its storage is gathered into
    // again whenever it would have been: the numbers do not change, the
    // memory does).
    kKeepGatheredUnits,
  };
  Kind kind = Kind::kNone;
  int bucket = -1;
  std::string parameter;
};

// "" (none), "sum_not_average", "bucket_never_synced:<bucket>",
// "parameter_unreduced:<parameter name>", "keep_full_gradients" or
// "keep_gathered_units";
// kInvalidArgument naming --testonly_sync_fault otherwise. Bucket and name
// are checked in the strategy's Setup.
absl::StatusOr<SyncTestFault> ParseSyncTestFault(const std::string& text);
std::string SyncTestFaultName(const SyncTestFault& fault);

// kInvalidArgument naming the flag and the strategies the fault applies to
// when `strategy` cannot apply it.
absl::Status CheckSyncTestFaultApplies(const SyncTestFault& fault,
                                       StrategyKind strategy);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_SYNC_FAULT_H_
