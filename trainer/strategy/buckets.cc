#include "trainer/strategy/buckets.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"

namespace mtb {

int64_t BucketCapBytes(double bucket_cap_mb) {
  return std::max<int64_t>(1, std::llround(bucket_cap_mb * (1 << 20)));
}

std::vector<std::vector<int>> AssignBuckets(
    const std::vector<int64_t>& bytes, const std::vector<int64_t>& limits) {
  CHECK(!limits.empty());
  for (int64_t limit : limits) CHECK_GT(limit, 0);
  std::vector<std::vector<int>> buckets;
  std::vector<int> open;
  int64_t open_bytes = 0;
  size_t limit_index = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    open.push_back(static_cast<int>(i));
    open_bytes += bytes[i];
    if (open_bytes >= limits[limit_index]) {
      buckets.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
      limit_index = std::min(limit_index + 1, limits.size() - 1);
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace mtb
