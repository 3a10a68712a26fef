// How much memory one rank of a training run needs, estimated from the
// configuration before anything is allocated, and the check that refuses a
// run the host cannot hold (Linux overcommits, so an oversized run
// would otherwise be SIGKILLed by the kernel mid-step, not refused).
#ifndef MTB_TRAINER_MEMORY_MEMORY_ESTIMATE_H_
#define MTB_TRAINER_MEMORY_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/host_memory.h"
#include "trainer/strategy/registry.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// Parameters of the GPT (trainer/model/model.h) from its shape alone:
// V d + T d + L (12 d^2 + 13 d) + 2 d (the LM head is tied to wte). The
// estimate below counts what one rank holds: with --tp = n (docs/tp.md)
// V d / n + T d + 2 d + L ((12 d^2 + 7 d) / n + 6 d).
int64_t GptParameterCount(const TrainConfig& config);
// Its units (trainer/model/parameter_store.h): the root, V d + T d + 2 d, and each
// block, 12 d^2 + 13 d.
int64_t GptRootUnitCount(const TrainConfig& config);
int64_t GptBlockUnitCount(const TrainConfig& config);

// Per rank, in bytes (MemoryEstimate in train_result.proto says what each
// term counts), for config.strategy() on `world_size` ranks. The closed forms
// (P = parameter count (a tp rank's), N = world size (over --tp: the dp
// group), fp32 parameters and AdamW state;
// shards rounded up to whole elements):
//   single, ddp  4P params + 4P grads + 8P state              (16P)
//   zero1        4P params + 4P grads + 8P/N state            (8P + 8P/N)
//                (+ 4P/N gradient shards with --grad_sync=every)
//   zero2        4P params + 4P/N grads + 8P/N state          (4P + 12P/N)
//                (+ 4P full gradients with --grad_sync=last and K > 1)
//   fsdp         4P/N params + 4P/N grads + 8P/N state         (16P/N)
//                + 4 Pr gathered root + 4 Pr its full gradient  (8 Pr)
//                + 4 Pu the computing block gathered, 4 Pu its full gradient,
//                  4 Pu the prefetched next block               ((8 + 4 f) Pu)
//                (Pr the root unit, Pu a block unit, f 1 with --fsdp_prefetch;
//                without reshard_after_forward every block is gathered at the
//                end of the forward: 4 L Pu instead of (4 + 4 f) Pu; with
//                --grad_sync=last and K > 1 every full gradient is kept: 4P)
// plus the collectives' temporaries, bounded by the buckets in flight (not by
// the model): zero1 2 buckets (reduce-scatter blocks), zero2 4 (those and the
// staging copies), each pair at most the model; fsdp the previous block's
// reduce-scatter in flight (its full gradient and the received blocks, 8 Pu)
// and with prefetch the gather in flight's replicated input (4 Pu); ddp
// reduces its buckets in place (views of the flat gradient buffer): 0.
// Activations and logits do not depend on the strategy.
MemoryEstimate EstimateRankMemory(const TrainConfig& config, int world_size);
MemoryEstimate EstimateRankMemoryFor(const TrainConfig& config, int world_size,
                                     StrategyKind strategy);

// --estimate_memory: a table of every strategy's estimate per rank for
// `config` on `world_size` ranks (one row per strategy, a column per term),
// with the configuration it assumed in a line above it.
std::string RenderMemoryEstimates(const TrainConfig& config, int world_size);

// kInvalidArgument when `ranks_per_host` ranks of `estimate` exceed the
// host's total memory: one line naming the estimate, its largest terms and
// the flags that lower them. A run above what is available now but within
// the total passes; `warning` (when not null) then says so.
absl::Status CheckMemoryFits(const MemoryEstimate& estimate, int ranks_per_host,
                             const HostMemory& host, std::string* warning);

}  // namespace mtb

#endif  // MTB_TRAINER_MEMORY_MEMORY_ESTIMATE_H_
