// How much memory this host can give the processes of a run: MemTotal and
// MemAvailable from /proc/meminfo, each capped by the cgroup's memory.max
// (containers, Slurm) when one is set. The trainer refuses runs beyond it;
// doctor reports it. And this process's resident memory (/proc/self/status),
// the figure a benchmark compares across runtimes (ours and PyTorch's).
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

struct ProcessMemory {
  int64_t rss_bytes = 0;  // VmRSS: resident now
  int64_t hwm_bytes = 0;  // VmHWM: the highest resident so far
};

// kUnavailable when /proc/self/status has no VmRSS/VmHWM (not Linux).
absl::StatusOr<ProcessMemory> ReadProcessMemory();

}  // namespace mtb

#endif  // MTB_COMMON_BASE_HOST_MEMORY_H_
