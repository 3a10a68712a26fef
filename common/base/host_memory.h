// How much memory this host can give the processes of a run: MemTotal and
// MemAvailable from /proc/meminfo, each capped by the cgroup's memory.max
// (containers, Slurm) when one is set. The trainer refuses runs beyond it;
// doctor reports it.
#ifndef MTB_COMMON_BASE_HOST_MEMORY_H_
#define MTB_COMMON_BASE_HOST_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace mtb {

struct HostMemory {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
  std::string source;  // "MemTotal", or "cgroup memory.max"
};

absl::StatusOr<HostMemory> ReadHostMemory();

}  // namespace mtb

#endif  // MTB_COMMON_BASE_HOST_MEMORY_H_
