// Gradient bucket assignment for DDP, PyTorch's rule
// (compute_bucket_assignment_by_size in c10d's reducer.cpp): walk the
// gradients in the order they become ready, add each to the open bucket, and
// close the bucket as soon as it holds at least its limit. The limits are
// taken in turn and the last repeats: {1 MiB, bucket_cap} gives a small first
// bucket (launched early, so that communication starts soon after backward
// does) and bucket_cap-sized ones after it. A bucket may exceed its limit by
// its last gradient; a gradient is never split. Torch-free. What a bucket
// costs on the wire is the collective layer's byte model
// (common/collective/traffic.h), not computed here.
#ifndef MTB_TRAINER_STRATEGY_BUCKETS_H_
#define MTB_TRAINER_STRATEGY_BUCKETS_H_

#include <cstdint>
#include <vector>

namespace mtb {

// PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES.
inline constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;

// --bucket_cap_mb in bytes (at least 1): the buckets' limit after the first.
int64_t BucketCapBytes(double bucket_cap_mb);

// `bytes[i]`: the size of gradient i, in ready order. `limits`: non-empty,
// positive. Returns the buckets in launch order, each a list of indices into
// `bytes` in ready order; together they hold every index once.
std::vector<std::vector<int>> AssignBuckets(const std::vector<int64_t>& bytes,
                                            const std::vector<int64_t>& limits);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_BUCKETS_H_
