// The memory acceptance check of issues 12 and 13 (//trainer:memory_process_test):
// what each rank held at its peak (TrainResult.memory[r].at_peak, walked by
// trainer/memory/memory_peak.h) against the strategy's closed forms, line by line,
// with the in-flight terms each strategy states. The fault test runs zero2
// with --testonly_sync_fault=keep_full_gradients and asserts that this same
// check fails, so it is known to bite.
//
// The bounds (P parameters, N ranks, B the largest bucket's bytes; a
// reduce-scatter's blocks are N x ceil(bucket / N) elements, at most
// B + 4N bytes):
//
//   parameters      4P                                    +-10%
//   gradients       ddp, zero1: 4P                        +-10%
//                   zero2: 4P/N, + at most one bucket of  -10% .. +10% + B
//                   .grad tensors (the bucket backward is
//                   filling: they exist until it launches)
//   AdamW state     ddp 8P, zero1 and zero2 8P/N          +-10%
//   the three       ddp 16P, zero1 8P + 8P/N,             -10% .. +10%
//   together        zero2 4P + 12P/N (+ the gradients'     (+ B for zero2)
//                   in-flight bucket)
//   collective      ddp 0; zero1 2 reduce-scatter blocks  at most
//                   (2 buckets in flight; a finished one's
//                   are freed when its wait returns:
//                   Communicator::TemporaryBytes); zero2
//                   those + 2 staging copies = 4 buckets
//                   (the optimizer's gathers: 2 replicated
//                   inputs, within both)
//   fsdp (U the largest block unit's bytes, R the root unit's, f 1 with
//   --fsdp_prefetch; units are the strategy's "buckets"):
//   parameters      4P/N + R (the root gathered for the    -10% .. +10%
//                   whole step)                            + (1 + f) U
//                                                          (all blocks
//                                                          without reshard)
//   gradients       4P/N                                   -10% .. +10%
//                                                          + R + 2U (the
//                   root's and the computing block's full gradients, the
//                   previous block's until its reduce-scatter lands)
//   AdamW state     8P/N                                   +-10%
//   the three       16P/N (+ both in-flight terms)
//   collective      a reduce-scatter's blocks and (1 + f) gathers'
//                   replicated inputs (the previous block's reduce-scatter
//                   lands before the next is launched): (2 + f)(U + 4N)
//                                                          at most
//   unattributed    at least 0, at most 1.5 x the memory estimate's
//                   activations + logits (its own accuracy, 1.07-1.33x)
//   peak found      the breakdown's peak equals the allocator's peak of the
//                   rank (the interval attribution found it exactly)
//
// Only for --grad_sync=last with ddp and zero1 and every with zero2 and
// fsdp, K = 1
// (what the memory test runs); other settings add shards or full gradients
// the bounds do not state.
#ifndef MTB_TRAINER_MEMORY_MEMORY_CHECK_H_
#define MTB_TRAINER_MEMORY_MEMORY_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/tests/check_report.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The closed forms for one rank (bytes), and the in-flight allowances.
struct MemoryFormula {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t total() const { return parameters + gradients + optimizer_state; }
  // What the gradients may hold beyond the formula (zero2: one bucket).
  int64_t gradients_in_flight = 0;
  // What the parameters may hold beyond it (fsdp: gathered blocks).
  int64_t parameters_in_flight = 0;
  // The most the collective line may hold.
  int64_t collective_bound = 0;
};

// For result's strategy, model and world size (result.memory_size()).
MemoryFormula MemoryFormulaFor(const TrainResult& result);

enum class MemoryCheckKind {
  kParameters,
  kGradients,
  kOptimizerState,
  kTotal,
  kCollective,
  kUnattributed,
  kPeakFound,
};

// What the check found (check_report.h).
using MemoryCheck = CheckReport<MemoryCheckKind>;

// Every counted rank's breakdown at its peak against MemoryFormulaFor.
MemoryCheck CheckMemoryAtPeak(const TrainResult& result);

}  // namespace mtb

#endif  // MTB_TRAINER_MEMORY_MEMORY_CHECK_H_
