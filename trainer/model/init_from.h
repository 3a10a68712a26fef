// --init_from=DIR|FILE.safetensors: a run starts from a GPT-2-layout
// safetensors model (ours exported by `ckpt_tool export --format=safetensors`,
// or one trained elsewhere) instead of the seeded initialisation
// (docs/checkpoint.md, "Import").
#ifndef MTB_TRAINER_MODEL_INIT_FROM_H_
#define MTB_TRAINER_MODEL_INIT_FROM_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/hf/gpt2_tensors.h"
#include "trainer/run/run_component.h"
#include "trainer/run/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// Reads and checks `path` for a run of `config`, before any rank starts:
// DIR means DIR/model.safetensors with DIR/config.json (required); a FILE
// ending in .safetensors takes config.json beside it when there is one. The
// config must be one our GPT computes (hf::CheckGpt2Config) with this run's
// sizes: every differing field is named ("n_embd=64 vs --d_model=32"). Then
// every parameter must be there with its Conv1D shape (hf::
// DecodeGpt2Safetensors: names, shapes, orientation, the tied head).
// kInvalidArgument naming --init_from, the file and the rule; the returned
// parameters are fp32 in our orientation and model order.
absl::StatusOr<hf::OurParameters> ReadInitFrom(const std::string& path, const TrainConfig& config);

// Writes `parameters` into `strategy`'s model (its "model/" checkpoint
// pieces: whatever part of each parameter this rank holds), leaves the
// optimizer state as Setup made it, then FinishCheckpointLoad. Collective as
// FinishCheckpointLoad: every rank calls it after Setup, before the first
// step.
absl::Status InitializeParameters(const hf::OurParameters& parameters, Strategy& strategy);

// The run component (trainer/run/run_component.h) that calls
// InitializeParameters at the run's start unless it resumed from a checkpoint
// (whose model wins); `parameters` must outlive it. One run: main refuses
// --init_from with --repeat > 1.
std::unique_ptr<RunComponent> MakeInitFromComponent(const hf::OurParameters* parameters);

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_INIT_FROM_H_
