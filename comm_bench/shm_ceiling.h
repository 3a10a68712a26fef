// The intra-host ceiling of the shared-memory transport (docs/comm_bench.md,
// "Ceiling"): for each op's shape and size, as many processes as ranks move
// and reduce the same bytes through a shared segment, chunk by chunk through
// slots of the transport's size, exactly as the transport's algorithms do
// (common/collective/shm_transport.h), but with no waiting between phases and
// no checks. What a collective could reach if synchronisation were free: a
// collective that beats it by more than 10% means the ceiling (or the
// collective's byte count) is wrong.
#ifndef MTB_COMM_BENCH_SHM_CEILING_H_
#define MTB_COMM_BENCH_SHM_CEILING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm_bench/comm_bench.pb.h"

namespace mtb::comm_bench {

struct ShmCeilingOptions {
  int processes = 2;
  // nccl-tests' size S of each point (comm_bench's size column).
  std::vector<int64_t> sizes;
  // all_reduce, reduce_scatter, all_gather, broadcast, all_to_all.
  std::vector<std::string> ops;
  int rounds = 5;
  // The transport's slot (CommunicatorOptions::shm_slot_bytes).
  int64_t slot_bytes = int64_t{1} << 20;
};

// Forks the processes; call before starting threads. One point per (op,
// size): busbw-equivalent GB/s (nccl-tests' factor for the op), the median
// over rounds of the slowest process.
absl::StatusOr<std::vector<CommBenchShmCeilingPoint>> MeasureShmCeiling(
    const ShmCeilingOptions& options);

// The op whose shape `op` shares (all_to_allv: all_to_all), or "" if none.
std::string ShmCeilingShapeOf(const std::string& op);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_SHM_CEILING_H_
