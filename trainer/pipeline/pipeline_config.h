// The pipeline's flags as one options struct, and their rules (docs/
// pipeline.md "Flags"). Torch-free: trainer/config/config.cc calls these in its one
// validation pass, before any rank starts.
#ifndef MTB_TRAINER_PIPELINE_PIPELINE_CONFIG_H_
#define MTB_TRAINER_PIPELINE_PIPELINE_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/pipeline/partition.h"
#include "trainer/pipeline/schedule.h"
#include "trainer/train_result.pb.h"

namespace mtb::pipeline {

// Whether `config` runs a pipeline (--pp > 1).
inline bool IsPipelined(const TrainConfig& config) { return config.pp() > 1; }

struct PipelineOptions {
  int stages = 1;
  int micro_batches = 1;
  ScheduleKind schedule = ScheduleKind::kOneForwardOneBackward;
  // [stage]: blocks, first block, load.
  std::vector<StageBlocks> partition;
  bool skip_tied_embedding_sum = false;  // tests only
};

// The rules, each refusal one line naming the flag: --pp at most
// --n_layers, --pp_split's stages and sum, --pp_schedule's value,
// --pp_microbatches dividing --batch_size, and what a pipelined run does not
// support (--grad_accum > 1, --reduction=exact, --precision=bf16,
// --activation_checkpointing, --repeat > 1, a --strategy whose registry entry
// gives a pipeline_refusal: fsdp). --pp_split and the test flag
// without --pp > 1 are refused too. OK for a config that is not pipelined
// and sets none of them.
absl::Status ValidatePipelineConfig(const TrainConfig& config);

// A pipelined run's world is pp x dp x tp: --pp x --tp must divide it.
absl::Status ValidatePipelineWorldSize(const TrainConfig& config,
                                       int world_size);

// The options of a valid pipelined config.
absl::StatusOr<PipelineOptions> PipelineOptionsOf(const TrainConfig& config);

}  // namespace mtb::pipeline

#endif  // MTB_TRAINER_PIPELINE_PIPELINE_CONFIG_H_
