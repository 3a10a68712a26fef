// Gradient bucket assignment for DDP, PyTorch's rule
// (compute_bucket_assignment_by_size in c10d's reducer.cpp): walk the
// gradients in the order they become ready, add each to the open bucket, and
// close the bucket as soon as it holds at least its limit. The limits are
// taken in turn and the last repeats: {1 MiB, bucket_cap} gives a small first
// bucket (launched early, so that communication starts soon after backward
// does) and bucket_cap-sized ones after it. A bucket may exceed its limit by
// its last gradient; a gradient is never split. Torch-free.
#ifndef MTB_TRAINER_STRATEGY_BUCKETS_H_
#define MTB_TRAINER_STRATEGY_BUCKETS_H_

#include <cstdint>
#include <vector>

namespace mtb {

// PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES.
inline constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;

// `bytes[i]`: the size of gradient i, in ready order. `limits`: non-empty,
// positive. Returns the buckets in launch order, each a list of indices into
// `bytes` in ready order; together they hold every index once.
std::vector<std::vector<int>> AssignBuckets(const std::vector<int64_t>& bytes,
                                            const std::vector<int64_t>& limits);

// 2(n-1)/n * bytes: what one rank sends (and receives) for an all-reduce of
// `bytes` with a bandwidth-optimal (ring) algorithm; 0 for one rank.
double AllReduceClosedFormBytes(int64_t bytes, int world_size);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_BUCKETS_H_
