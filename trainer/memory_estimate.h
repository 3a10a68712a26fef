// How much memory one rank of a training run needs, estimated from the
// configuration before anything is allocated, and the check that refuses a
// run the host cannot hold (issue 11: Linux overcommits, so an oversized run
// would otherwise be SIGKILLed by the kernel mid-step, not refused).
#ifndef MTB_TRAINER_MEMORY_ESTIMATE_H_
#define MTB_TRAINER_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/host_memory.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// Parameters of the GPT of SPEC §4 (trainer/model.h) from its shape alone:
// V d + T d + L (12 d^2 + 13 d) + 2 d (the LM head is tied to wte).
int64_t GptParameterCount(const TrainConfig& config);

// Per rank, in bytes (MemoryEstimate in train_result.proto says what each
// term counts). `world_size` matters once strategies shard state.
MemoryEstimate EstimateRankMemory(const TrainConfig& config, int world_size);

// kInvalidArgument when `ranks_per_host` ranks of `estimate` exceed the
// host's total memory: one line naming the estimate, its largest terms and
// the flags that lower them. A run above what is available now but within
// the total passes; `warning` (when not null) then says so.
absl::Status CheckMemoryFits(const MemoryEstimate& estimate, int ranks_per_host,
                             const HostMemory& host, std::string* warning);

}  // namespace mtb

#endif  // MTB_TRAINER_MEMORY_ESTIMATE_H_
