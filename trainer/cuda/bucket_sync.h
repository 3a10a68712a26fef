// The multi-GPU side of trainer_cuda written apart from the device: the
// gradient's buckets launched while backward runs (ddp's all-reduce or
// ZeRO-1's reduce-scatter), ZeRO-1's shard of the update and the gather of
// the parameters after it. Plain C++ on flat float spans and the abstract
// SyncCollectives (trainer/strategy/sync_plan.h): over NCCL on device memory
// in trainer_cuda, over common/collective on host memory in
// bucket_sync_test. The plan (buckets, launch order, shard boundaries) is
// MakeSyncPlan's, the CPU trainer's own (sync_plan_test checks it against
// DdpStrategy and ZeroStrategy).
#ifndef MTB_TRAINER_CUDA_BUCKET_SYNC_H_
#define MTB_TRAINER_CUDA_BUCKET_SYNC_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trainer/cuda/gpt_cuda.h"
#include "trainer/strategy/sync_plan.h"

namespace mtb {
namespace cuda {

// How a device's collectives are ordered after the model's kernels (NCCL on
// its own CUDA stream); absent for host collectives, which are complete when
// they return.
class CollectiveStream {
 public:
  virtual ~CollectiveStream() = default;
  // The collectives launched after this call start on the device only once
  // `ready` (an event of the model's stream) has completed, and return as
  // soon as they are launched, until Drain.
  virtual void LaunchAfter(void* ready) = 0;
  // Waits for every launched collective; after it, collectives complete
  // before they return again.
  virtual absl::Status Drain() = 0;
};

// What a bucket's collective does to the gradient.
enum class BucketOp {
  kAllReduce,      // ddp: the bucket averaged in place
  kReduceScatter,  // zero1: this rank's shard of the average into shard_grads
};

// One step's gradient sync, bucket by bucket in the plan's launch order. As
// the model's GradientReadyHook, Ready launches every bucket whose tensors
// are all final, as soon as they are (in launch order: a bucket waits for
// the ones before it, so every rank issues the same sequence); Finish
// launches what is left (everything when Ready was never called: the sync
// after backward) and waits until all of it is done. A collective is
// launched on every rank, the world of one included.
class BucketSync : public GradientReadyHook {
 public:
  // `grads`: the flat gradient (plan.numel floats); `shard_grads`: zero1's
  // ShardNumel(rank) floats (kReduceScatter), laid out by ShardOffsets.
  // `stream`: null for host collectives. All must outlive this.
  BucketSync(const SyncPlan& plan, BucketOp op, SyncCollectives& collectives,
             CollectiveStream* stream, float* grads, float* shard_grads);

  // Before each step's backward: no tensor is final.
  void Start();
  void Ready(const std::vector<int>& tensors, void* ready) override;
  // Every bucket launched and complete; the first failure otherwise (one
  // that happened inside Ready included).
  absl::Status Finish();

  float* shard_gradients() const { return shard_grads_; }

 private:
  absl::Status Launch(int bucket);
  const SyncPlan& plan_;
  const BucketOp op_;
  SyncCollectives& collectives_;
  CollectiveStream* stream_;
  float* grads_;
  float* shard_grads_;
  std::vector<int> bucket_of_;          // per layout position
  std::vector<int64_t> shard_offset_;   // per bucket: where its shard lands
  std::vector<int> missing_;            // per bucket: tensors not final yet
  int next_ = 0;                        // the next bucket to launch
  absl::Status status_;
};

// The bytes rank `rank` sends per step by the collective layer's byte model
// (common/collective/traffic.h, as the CPU trainer's strategies count their
// expected bytes): the gradient's buckets (all-reduce, or zero1's
// reduce-scatters with the plan's shard counts) and zero1's parameter
// all-gathers (0 for ddp).
struct StepBytes {
  int64_t grad = 0;
  int64_t gather = 0;
};
StepBytes ExpectedStepBytes(const SyncPlan& plan, BucketOp op, int rank);

// Whether `plan` is the CPU trainer's plan for `numel` elements over its
// world: buckets tiling [0, numel) once and every bucket's shard boundaries
// ShardCounts' (which elements each rank owns under zero1, as the CPU
// trainer's zero1 and its checkpoints place them). InvalidArgument naming
// the first bucket that is not.
absl::Status CheckShardPlan(const SyncPlan& plan, int64_t numel);

// ZeRO-1's shard buffer: where each bucket's shard (this rank's
// counts[rank] elements) starts in it. The shards lie back to back in the
// order of their place in the flat buffer (not the launch order), so that
// over one rank the shard buffer is the gradient buffer element for element
// and its sum of squares the same kernel's over the same layout (bit for bit
// with single).
std::vector<int64_t> ShardOffsets(const SyncPlan& plan, int rank);

// ZeRO-1: this rank's UpdateRanges split at tensor boundaries (each piece
// takes its tensor's weight-decay flag), in the flat buffer's order, with
// where each lands in the shard buffer (ShardOffsets). `tensors`: layout
// order, tiling the buffer.
std::vector<UpdatePiece> ShardPieces(const SyncPlan& plan, int rank,
                                     const std::vector<DeviceTensor>& tensors);

// ZeRO-1 after the reduce-scatter: the global gradient norm (this rank's
// shard's sum of squares, summed over ranks by `sum_over_ranks`, as the CPU
// trainer's zero1), clipping (max_grad_norm > 0: coefficient
// max_grad_norm / (norm + 1e-6)), AdamW on `pieces` and the parameters
// all-gathered bucket by bucket, so every rank holds every update. Fills
// stats' grad_norm, clipped and optimizer_ms.
absl::Status Zero1Update(const SyncPlan& plan, const std::vector<UpdatePiece>& pieces,
                         ShardedDevice& device, const float* shard_grads,
                         SyncCollectives& collectives,
                         const std::function<double(double)>& sum_over_ranks, int64_t step,
                         double lr, double max_grad_norm, StepStats* stats);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_BUCKET_SYNC_H_
