#include "trainer/strategy/sync_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "trainer/strategy/buckets.h"

namespace mtb {

std::vector<int64_t> ShardCounts(int64_t numel, int n) {
  CHECK_GE(n, 1);
  std::vector<int64_t> counts(n, numel / n);
  for (int p = 0; p < numel % n; ++p) ++counts[p];
  return counts;
}

int64_t PlanBucket::shard_start(int rank) const {
  int64_t start = 0;
  for (int p = 0; p < rank; ++p) start += counts[p];
  return start;
}

PlanRange PlanBucket::shard(int rank) const {
  return {offset + shard_start(rank), counts[rank]};
}

std::vector<PlanRange> SyncPlan::UpdateRanges(int rank) const {
  std::vector<PlanRange> ranges;
  for (const PlanBucket& bucket : buckets) {
    const PlanRange range = bucket.shard(rank);
    if (range.numel > 0) ranges.push_back(range);
  }
  return ranges;
}

int64_t SyncPlan::ShardNumel(int rank) const {
  int64_t total = 0;
  for (const PlanBucket& bucket : buckets) total += bucket.counts[rank];
  return total;
}

int SyncPlan::OwnerOf(int64_t element) const {
  for (const PlanBucket& bucket : buckets) {
    if (element < bucket.offset || element >= bucket.offset + bucket.numel) continue;
    int64_t start = bucket.offset;
    for (int p = 0; p < world_size; ++p) {
      if (element < start + bucket.counts[p]) return p;
      start += bucket.counts[p];
    }
  }
  return -1;
}

SyncPlan MakeSyncPlan(const std::vector<int64_t>& numels, int world_size,
                      int64_t first_cap_bytes, int64_t cap_bytes) {
  CHECK_GE(world_size, 1);
  SyncPlan plan;
  plan.world_size = world_size;
  std::vector<int64_t> offsets;
  for (int64_t numel : numels) {
    CHECK_GT(numel, 0);
    offsets.push_back(plan.numel);
    plan.numel += numel;
  }
  // Ready order: reverse layout order.
  std::vector<int64_t> bytes;
  for (auto it = numels.rbegin(); it != numels.rend(); ++it) bytes.push_back(*it * 4);
  const int last = static_cast<int>(numels.size()) - 1;
  for (const std::vector<int>& members : AssignBuckets(bytes, {first_cap_bytes, cap_bytes})) {
    PlanBucket bucket;
    for (int ready_index : members) {
      const int position = last - ready_index;
      bucket.tensors.push_back(position);
      bucket.numel += numels[position];
    }
    // Reverse layout order: the last member is the lowest in memory.
    bucket.offset = offsets[bucket.tensors.back()];
    bucket.counts = ShardCounts(bucket.numel, world_size);
    plan.buckets.push_back(std::move(bucket));
  }
  return plan;
}

absl::Status RunDdpSync(const SyncPlan& plan, SyncCollectives& collectives, float* grads) {
  if (plan.world_size == 1) return absl::OkStatus();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const PlanBucket& bucket = plan.buckets[b];
    if (absl::Status status =
            collectives.AllReduceAverage(grads + bucket.offset, bucket.numel);
        !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("ddp: all-reduce of bucket ", b, ": ",
                                                      status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status RunZero1ReduceScatter(const SyncPlan& plan, SyncCollectives& collectives,
                                   const float* grads, float* shard_grads) {
  const int rank = collectives.rank();
  int64_t at = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const PlanBucket& bucket = plan.buckets[b];
    if (plan.world_size == 1) {
      std::copy(grads + bucket.offset, grads + bucket.offset + bucket.numel, shard_grads + at);
    } else if (absl::Status status = collectives.ReduceScatterAverage(
                   grads + bucket.offset, shard_grads + at, bucket.counts);
               !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("zero1: reduce-scatter of bucket ", b,
                                                      ": ", status.message()));
    }
    at += bucket.counts[rank];
  }
  return absl::OkStatus();
}

absl::Status RunZero1Gather(const SyncPlan& plan, SyncCollectives& collectives,
                            float* params) {
  if (plan.world_size == 1) return absl::OkStatus();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const PlanBucket& bucket = plan.buckets[b];
    if (absl::Status status = collectives.AllGatherInPlace(params + bucket.offset, bucket.counts);
        !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("zero1: all-gather of bucket ", b, ": ",
                                                      status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace mtb
