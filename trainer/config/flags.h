// The trainer's command-line flags (defined in flags.cc, one per TrainConfig
// field, same names) and their conversion to a TrainConfig.
#ifndef MTB_TRAINER_CONFIG_FLAGS_H_
#define MTB_TRAINER_CONFIG_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "trainer/checkpoint/plan.h"
#include "trainer/config/config.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The flags' current values (after parsing), not yet resolved or validated;
// kInvalidArgument, one line, for a value an enum field does not have
// ("--precision=fp16 must be fp32 or bf16").
absl::StatusOr<TrainConfig> TrainConfigFromFlags();

// The pipeline flags whose values TrainConfigFromFlags does not keep: --pp
// below 1, and --pp_schedule or --pp_microbatches given without --pp > 1.
absl::Status ValidatePipelineFlags();

// Which warm-up flags were set on the command line (FlagWasSet).
WarmupsGiven WarmupsGivenOnCommandLine();

// The strategy-scoped flags (trainer/strategy/registry.h) and the
// conditional ones (kConditionalFlags, trainer/config/config.h) set on the command
// line, for ValidateConfig: one that does nothing in this configuration is
// refused.
std::vector<std::string> ScopedFlagsOnCommandLine();

// --checkpoint_dir, --save_every, --keep_last, --resume,
// --overwrite_checkpoints and --async_checkpoint, paths resolved (ResolveUserPath; "latest" stays).
checkpoint::CheckpointOptions CheckpointOptionsFromFlags();

// --tp below 1 (TrainConfigFromFlags stores it as unset), as one line.
absl::Status TensorParallelFlagError();

}  // namespace mtb

#endif  // MTB_TRAINER_CONFIG_FLAGS_H_
