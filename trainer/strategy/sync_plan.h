// The gradient synchronisation plan of the bucketed strategies (ddp, zero1),
// apart from any device: which flat elements form each bucket, in which order
// buckets launch, how each bucket splits into per-rank shards, and which rank
// updates which elements under ZeRO-1. Torch-free, for the CUDA trainer
// (trainer/cuda, over NCCL): RunDdpSync / RunZero1ReduceScatter /
// RunZero1Gather sequence the plan's collectives on raw float buffers through
// SyncCollectives, whatever memory they live in. It equals what the LibTorch
// strategies do (bucket_engine.h's AssignGradientBuckets, zero.cc's pieces):
// sync_plan_test runs the plan alone against DdpStrategy and ZeroStrategy
// bit for bit. The buckets come from the same rule (buckets.h).
//
// Vocabulary (as bucket_engine.h): tensors are given in layout order (their
// order in the flat buffer); backward readies them in reverse layout order,
// and buckets are assigned in that order by PyTorch's rule (buckets.h) with
// limits {first_cap_bytes, cap_bytes} at 4 bytes per element. A bucket is a
// contiguous slice of the flat buffer; its shard for rank r is counts[r]
// consecutive elements after those of ranks 0..r-1 (ShardCounts).
#ifndef MTB_TRAINER_STRATEGY_SYNC_PLAN_H_
#define MTB_TRAINER_STRATEGY_SYNC_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mtb {

// `numel` elements split among n ranks, the first numel % n one element
// longer. The one definition of the split: trainer/model/state_pieces.h's
// EvenCounts, which the LibTorch strategies' pieces use, returns this.
std::vector<int64_t> ShardCounts(int64_t numel, int n);

struct PlanRange {
  int64_t offset = 0;  // flat element
  int64_t numel = 0;
  bool operator==(const PlanRange& other) const {
    return offset == other.offset && numel == other.numel;
  }
};

struct PlanBucket {
  std::vector<int> tensors;  // layout positions, in ready (reverse) order
  int64_t offset = 0;        // the bucket's lowest flat element
  int64_t numel = 0;
  std::vector<int64_t> counts;  // per rank (ShardCounts(numel, world_size))
  // Rank r's shard: flat elements [offset + shard_start(r), + counts[r]).
  int64_t shard_start(int rank) const;
  PlanRange shard(int rank) const;
};

struct SyncPlan {
  int world_size = 1;
  std::vector<PlanBucket> buckets;  // in launch order
  int64_t numel = 0;                // the whole flat buffer

  // ZeRO-1: the flat ranges rank `rank` updates (its shard of each bucket,
  // in bucket order; empty shards left out). Over all ranks they cover every
  // element once.
  std::vector<PlanRange> UpdateRanges(int rank) const;
  // The elements rank `rank` holds optimizer state for (sum of its shards).
  int64_t ShardNumel(int rank) const;
  // The rank that updates flat element `element` under ZeRO-1.
  int OwnerOf(int64_t element) const;
};

// `numels`: each tensor's element count, in layout order (positive).
SyncPlan MakeSyncPlan(const std::vector<int64_t>& numels, int world_size,
                      int64_t first_cap_bytes, int64_t cap_bytes);

// The collectives a plan issues, on the caller's buffers (host memory over
// common/collective, device memory over NCCL). Every rank issues the same
// calls in the same order.
class SyncCollectives {
 public:
  virtual ~SyncCollectives() = default;
  virtual int rank() const = 0;
  // In place: data[0, numel) replaced by its average over ranks.
  virtual absl::Status AllReduceAverage(float* data, int64_t numel) = 0;
  // `bucket` (sum(counts) elements) averaged over ranks; this rank's
  // counts[rank()] elements (after those of lower ranks) into `shard`.
  virtual absl::Status ReduceScatterAverage(const float* bucket, float* shard,
                                            const std::vector<int64_t>& counts) = 0;
  // In place: each rank's slot of `bucket` (as above) sent to every rank.
  virtual absl::Status AllGatherInPlace(float* bucket,
                                        const std::vector<int64_t>& counts) = 0;
};

// DDP: every bucket of the flat gradient `grads` averaged over ranks, in
// launch order.
absl::Status RunDdpSync(const SyncPlan& plan, SyncCollectives& collectives, float* grads);

// ZeRO-1, before the update: every bucket of `grads` reduce-scattered
// (average); this rank's shards land back to back in `shard_grads`
// (ShardNumel(rank) floats, bucket order: UpdateRanges' order).
absl::Status RunZero1ReduceScatter(const SyncPlan& plan, SyncCollectives& collectives,
                                   const float* grads, float* shard_grads);

// ZeRO-1, after this rank updated its UpdateRanges of `params`: every
// bucket all-gathered in place, so every rank holds every update.
absl::Status RunZero1Gather(const SyncPlan& plan, SyncCollectives& collectives,
                            float* params);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_SYNC_PLAN_H_
