// trainer_cuda's run: the config checks of the CUDA path, then the steps of one
// run on one GPU through GptCuda (gpt_cuda.h), recorded as the LibTorch trainer
// records them (TrainResult: runs[].steps[], model, provenance). The device
// model is passed in, so the loop, the data and the result are tested on a CPU
// with a stand-in.
#ifndef MTB_TRAINER_CUDA_RUN_H_
#define MTB_TRAINER_CUDA_RUN_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/cuda/gpt_cuda.h"
#include "trainer/cuda/layout.h"
#include "trainer/data/samples.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace cuda {

// The values the CUDA path does not implement yet, refused with one line
// naming the flag (kInvalidArgument): --precision other than fp32, a
// --strategy other than single, --dropout > 0, --grad_accum > 1,
// --repeat > 1, --reduction=exact, --activation_checkpointing. Call after
// ResolveConfig and ValidateConfig.
absl::Status CheckCudaConfig(const TrainConfig& config);

// Makes the device model for `layout` initialised with `parameters`; null and
// *error on failure (CreateGptCuda on a GPU, trainer_cuda's main).
using GptCudaFactory = std::function<std::unique_ptr<GptCuda>(
    const GptDims& dims, const ParameterLayout& layout,
    const float* parameters, std::string* error)>;

// Trains config.steps() steps from the seeded initialisation on `samples`.
// `device` goes into the result's provenance. With `checkpoints` (the plan
// PlanCheckpoints made for one rank; default: none) the run resumes from its
// checkpoint (the parameters, AdamW's moments and count, its recorded state
// checked against where this configuration is at that step) and saves after
// the steps the plan names, in the CPU trainer's format (checkpoint_state.h)
// through the same protocol (trainer/checkpoint/protocol.h); the result's
// `checkpoint` says what it did. Errors: kResourceExhausted when the model
// cannot be created (the factory's line), kFailedPrecondition
// (deterministic) on a non-finite loss; a resume or save that fails, as the
// CPU trainer words it.
absl::StatusOr<TrainResult> RunCudaTraining(
    const TrainConfig& config, const SampleSource& samples,
    const DeviceInfo& device, const GptCudaFactory& factory,
    const checkpoint::CheckpointPlan& checkpoints = checkpoint::CheckpointPlan());

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_RUN_H_
