// The CUDA trainer's checkpoint state in the CPU trainer's format
// (trainer/run/strategy.h, "Checkpoint state"): one rank holding everything,
// as --strategy=single saves it. For every tensor of the layout, in its
// order, model/<name>, then optimizer/exp_avg/<name> and
// optimizer/exp_avg_sq/<name>, then optimizer/step (int64, shape {}): the
// logical tensors ckpt_tool verify/compare/export read and the CPU trainer
// resumes from. No LibTorch, no CUDA: the device's buffers are copied into a
// HostState (GptCuda::CopyStateToHost) and back (LoadState).
#ifndef MTB_TRAINER_CUDA_CHECKPOINT_STATE_H_
#define MTB_TRAINER_CUDA_CHECKPOINT_STATE_H_

#include <cstdint>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/cuda/layout.h"
#include "trainer/strategy/sync_plan.h"

namespace mtb {
namespace cuda {

// The training state on the host: layout.total() floats each.
struct HostState {
  std::vector<float> parameters;
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
  int64_t step = 0;  // AdamW's update count

  explicit HostState(int64_t total)
      : parameters(total), exp_avg(total), exp_avg_sq(total) {}
};

// The shards of `state` (views of its memory: keep it alive and unchanged
// until they are written).
std::vector<checkpoint::TensorShard> ShardsOf(const ParameterLayout& layout,
                                              const HostState& state);

// What one rank of a synchronised run (several ranks, ddp or zero1) saves,
// in the CPU trainer's format and order (its strategies'
// CheckpointPiecesToSave): the model/ pieces of every flat range of
// `ranges`, cut at tensor boundaries, then per range its
// optimizer/exp_avg/ and optimizer/exp_avg_sq/ pieces, then optimizer/step
// when `with_step` (rank 0). ddp: `ranges` is the rank's even slice of the
// buffer (ShardCounts over the whole buffer); zero1: its update ranges
// (SyncPlan::UpdateRanges). Over all ranks the pieces cover every element
// of every tensor once, so the checkpoint holds the same logical tensors as
// a single run's and any world size (the CPU trainer's too) resumes from it.
std::vector<checkpoint::TensorShard> RangeShardsOf(const ParameterLayout& layout,
                                                   const HostState& state,
                                                   const std::vector<PlanRange>& ranges,
                                                   bool with_step);

// The same tensors as requests that read a checkpoint straight into `state`.
std::vector<checkpoint::RangeRequest> RequestsInto(const ParameterLayout& layout,
                                                   HostState* state);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_CHECKPOINT_STATE_H_
