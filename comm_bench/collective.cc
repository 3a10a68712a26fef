#include "comm_bench/collective.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace mtb::comm_bench {

const std::vector<std::string>& CollectiveNames() {
  static const auto* names = new std::vector<std::string>{
      "all_reduce", "all_gather", "reduce_scatter",
      "broadcast",  "all_to_all", "all_to_allv"};
  return *names;
}

absl::StatusOr<std::unique_ptr<Collective>> MakeCollective(
    absl::string_view name, const AllToAllvPattern& pattern) {
  if (name == "all_reduce") return NewAllReduce();
  if (name == "all_gather") return NewAllGather();
  if (name == "reduce_scatter") return NewReduceScatter();
  if (name == "broadcast") return NewBroadcast();
  if (name == "all_to_all") return NewAllToAll();
  if (name == "all_to_allv") return NewAllToAllv(pattern);
  return absl::InvalidArgumentError(
      absl::StrCat("--ops: unknown collective '", name, "'; expected one of ",
                   absl::StrJoin(CollectiveNames(), ",")));
}

std::vector<int64_t> Collective::SweepSizes(int64_t min_bytes,
                                            int64_t max_bytes,
                                            int64_t step_factor) const {
  CHECK_GT(min_bytes, 0);
  CHECK_GT(step_factor, 1);
  std::vector<int64_t> sizes;
  for (int64_t size = min_bytes; size <= max_bytes; size *= step_factor) {
    sizes.push_back(size);
    if (size > max_bytes / step_factor) break;  // the next would overflow
  }
  return sizes;
}

CallShape WholeBufferShape(int64_t requested_bytes, DType dtype) {
  CallShape shape;
  shape.count = requested_bytes / ElementSize(dtype);
  shape.bytes = shape.count * ElementSize(dtype);
  shape.send_elements = shape.recv_elements = shape.count;
  shape.in_place_elements = shape.count;
  shape.bandwidth_bytes = shape.bytes;
  return shape;
}

int64_t ShardedCount(int64_t requested_bytes, int64_t element_size,
                     int world_size) {
  CHECK_GT(world_size, 0);
  const int64_t alignment = 16 / element_size;  // elements in 16 bytes
  const int64_t per_rank = requested_bytes / element_size / world_size;
  return per_rank / alignment * alignment;
}

PatternRange PatternRangeFor(DType dtype, int world_size, bool reduces) {
  CHECK_GT(world_size, 0);
  const int64_t limit = ExactIntegerLimit(dtype);
  PatternRange range;
  if (!reduces) {
    range.modulus = limit;
    return range;
  }
  range.stride = static_cast<int>((world_size + limit - 1) / limit);
  const int64_t contributors =
      (world_size + range.stride - 1) / range.stride;  // <= limit
  range.modulus = limit / contributors + 1;
  return range;
}

float PatternValue(const PatternRange& range, int seed, int rank,
                   int64_t index) {
  if (range.stride > 1 &&
      (static_cast<int64_t>(rank) + index) % range.stride != 0) {
    return 0;
  }
  const uint64_t modulus = static_cast<uint64_t>(range.modulus);
  // SplitMix64 finaliser over the three coordinates: neighbouring elements,
  // ranks and seeds get unrelated values, so a misplaced block shows.
  uint64_t x = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull ^
               (static_cast<uint64_t>(rank) + 1) * 0xC2B2AE3D27D4EB4Full ^
               (static_cast<uint64_t>(seed) + 1) * 0x165667B19E3779F9ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(x % modulus);
}

void Collective::FillInput(const CallContext& context, const CallShape& shape,
                           int seed, HostArray* input) const {
  const PatternRange range = pattern_range(context);
  for (int64_t i = 0; i < shape.send_elements; ++i) {
    input->Set(i, PatternValue(range, seed, context.rank, i));
  }
}

}  // namespace mtb::comm_bench
