#include "trainer/cuda/bucket_sync.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/collective/traffic.h"

namespace mtb {
namespace cuda {

BucketSync::BucketSync(const SyncPlan& plan, BucketOp op, SyncCollectives& collectives,
                       CollectiveStream* stream, float* grads, float* shard_grads)
    : plan_(plan), op_(op), collectives_(collectives), stream_(stream), grads_(grads),
      shard_grads_(shard_grads) {
  int positions = 0;
  for (const PlanBucket& bucket : plan_.buckets) {
    for (int t : bucket.tensors) positions = std::max(positions, t + 1);
  }
  bucket_of_.assign(positions, -1);
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    for (int t : plan_.buckets[b].tensors) bucket_of_[t] = static_cast<int>(b);
  }
  shard_offset_ = ShardOffsets(plan_, collectives_.rank());
  Start();
}

void BucketSync::Start() {
  missing_.clear();
  for (const PlanBucket& bucket : plan_.buckets) {
    missing_.push_back(static_cast<int>(bucket.tensors.size()));
  }
  next_ = 0;
  status_ = absl::OkStatus();
}

void BucketSync::Ready(const std::vector<int>& tensors, void* ready) {
  for (int t : tensors) {
    if (t >= 0 && t < static_cast<int>(bucket_of_.size()) && bucket_of_[t] >= 0) {
      --missing_[bucket_of_[t]];
    }
  }
  bool waited = false;
  while (status_.ok() && next_ < static_cast<int>(plan_.buckets.size()) &&
         missing_[next_] == 0) {
    // The bucket's gradients are written by kernels enqueued before `ready`.
    if (stream_ != nullptr && ready != nullptr && !waited) {
      stream_->LaunchAfter(ready);
      waited = true;
    }
    status_ = Launch(next_++);
  }
}

absl::Status BucketSync::Launch(int b) {
  const PlanBucket& bucket = plan_.buckets[b];
  absl::Status status =
      op_ == BucketOp::kAllReduce
          ? collectives_.AllReduceAverage(grads_ + bucket.offset, bucket.numel)
          : collectives_.ReduceScatterAverage(grads_ + bucket.offset,
                                              shard_grads_ + shard_offset_[b], bucket.counts);
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(op_ == BucketOp::kAllReduce ? "all-reduce" : "reduce-scatter",
                                   " of bucket ", b, ": ", status.message()));
}

absl::Status BucketSync::Finish() {
  while (status_.ok() && next_ < static_cast<int>(plan_.buckets.size())) {
    status_ = Launch(next_++);
  }
  if (stream_ != nullptr) {
    if (absl::Status drained = stream_->Drain(); status_.ok()) status_ = drained;
  }
  return status_;
}

StepBytes ExpectedStepBytes(const SyncPlan& plan, BucketOp op, int rank) {
  constexpr int64_t kFloatBytes = 4;
  StepBytes bytes;
  for (const PlanBucket& bucket : plan.buckets) {
    if (op == BucketOp::kAllReduce) {
      bytes.grad += collective::AllReduceTraffic(bucket.numel * kFloatBytes, plan.world_size).sent;
    } else {
      bytes.grad += collective::ReduceScatterVTraffic(bucket.counts, kFloatBytes, rank).sent;
      bytes.gather += collective::AllGatherVTraffic(bucket.counts, kFloatBytes, rank).sent;
    }
  }
  return bytes;
}

absl::Status CheckShardPlan(const SyncPlan& plan, int64_t numel) {
  std::vector<std::pair<int64_t, int>> starts;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const PlanBucket& bucket = plan.buckets[b];
    const std::vector<int64_t> want = ShardCounts(bucket.numel, plan.world_size);
    if (bucket.counts != want) {
      std::string counts;
      for (int64_t c : bucket.counts) absl::StrAppend(&counts, counts.empty() ? "" : ",", c);
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket ", b, " (", bucket.numel, " elements) splits as {", counts,
          "} over ", plan.world_size, " ranks, not the CPU trainer's even split (first ",
          bucket.numel % plan.world_size, " ranks one longer)"));
    }
    starts.push_back({bucket.offset, static_cast<int>(b)});
  }
  std::sort(starts.begin(), starts.end());
  int64_t at = 0;
  for (const auto& [offset, b] : starts) {
    if (offset != at) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket ", b, " starts at element ", offset, ", expected ", at,
          " (buckets must tile the flat buffer once)"));
    }
    at += plan.buckets[b].numel;
  }
  if (at != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("the buckets cover ", at, " of ", numel, " elements"));
  }
  return absl::OkStatus();
}

namespace {

// Bucket indices by their offset in the flat buffer.
std::vector<int> InMemoryOrder(const SyncPlan& plan) {
  std::vector<int> order(plan.buckets.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = static_cast<int>(b);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return plan.buckets[a].offset < plan.buckets[b].offset;
  });
  return order;
}

}  // namespace

std::vector<int64_t> ShardOffsets(const SyncPlan& plan, int rank) {
  std::vector<int64_t> offsets(plan.buckets.size());
  int64_t at = 0;
  for (int b : InMemoryOrder(plan)) {
    offsets[b] = at;
    at += plan.buckets[b].counts[rank];
  }
  return offsets;
}

std::vector<UpdatePiece> ShardPieces(const SyncPlan& plan, int rank,
                                     const std::vector<DeviceTensor>& tensors) {
  std::vector<UpdatePiece> pieces;
  const std::vector<int64_t> shard_offsets = ShardOffsets(plan, rank);
  for (int b : InMemoryOrder(plan)) {
    const PlanRange range = plan.buckets[b].shard(rank);
    const int64_t end = range.offset + range.numel;
    for (const DeviceTensor& tensor : tensors) {
      const int64_t lo = std::max(range.offset, tensor.offset);
      const int64_t hi = std::min(end, tensor.offset + tensor.numel);
      if (lo >= hi) continue;
      pieces.push_back(
          {lo, shard_offsets[b] + (lo - range.offset), hi - lo, tensor.weight_decay});
    }
  }
  return pieces;
}

absl::Status Zero1Update(const SyncPlan& plan, const std::vector<UpdatePiece>& pieces,
                         ShardedDevice& device, const float* shard_grads,
                         SyncCollectives& collectives,
                         const std::function<double(double)>& sum_over_ranks, int64_t step,
                         double lr, double max_grad_norm, StepStats* stats) {
  const int rank = collectives.rank();
  const double mine = device.SquaredNorm(shard_grads, plan.ShardNumel(rank));
  stats->grad_norm = std::sqrt(sum_over_ranks(mine));
  double grad_scale = 1.0;
  stats->clipped = false;
  if (max_grad_norm > 0 && stats->grad_norm > max_grad_norm) {
    grad_scale = max_grad_norm / (stats->grad_norm + 1e-6);
    stats->clipped = true;
  }
  stats->optimizer_ms = device.UpdatePieces(pieces, shard_grads, step, lr, grad_scale);
  const auto gather_start = std::chrono::steady_clock::now();
  float* params = device.parameters();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const PlanBucket& bucket = plan.buckets[b];
    if (absl::Status status = collectives.AllGatherInPlace(params + bucket.offset, bucket.counts);
        !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("zero1: all-gather of bucket ", b,
                                                      ": ", status.message()));
    }
  }
  stats->optimizer_ms += std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - gather_start)
                             .count();
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace mtb
