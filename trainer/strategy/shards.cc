#include "trainer/strategy/shards.h"

#include "glog/logging.h"

namespace mtb {

std::vector<int64_t> ShardCounts(int64_t numel, int n) {
  CHECK_GE(n, 1);
  CHECK_GE(numel, 0);
  std::vector<int64_t> counts(n, numel / n);
  for (int p = 0; p < numel % n; ++p) ++counts[p];
  return counts;
}

int64_t ShardOffset(const std::vector<int64_t>& counts, int rank) {
  CHECK(rank >= 0 && rank < static_cast<int>(counts.size())) << rank;
  int64_t offset = 0;
  for (int p = 0; p < rank; ++p) offset += counts[p];
  return offset;
}

}  // namespace mtb
