#include "common/base/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace mtb {
namespace {

// "MemTotal:  24576000 kB" (or "VmHWM:\t  1234 kB") -> bytes; -1 when
// absent.
int64_t MeminfoBytes(const std::string& meminfo, const std::string& key) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, key) || !absl::ConsumePrefix(&rest, ":")) {
      continue;
    }
    rest = absl::StripAsciiWhitespace(rest);
    const bool kilobytes = absl::ConsumeSuffix(&rest, " kB");
    int64_t value = 0;
    if (!absl::SimpleAtoi(rest, &value)) return -1;
    return kilobytes ? value * 1024 : value;
  }
  return -1;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<HostMemory> ReadHostMemory() {
  const std::string meminfo = ReadSmallFile("/proc/meminfo");
  HostMemory host;
  host.total_bytes = MeminfoBytes(meminfo, "MemTotal");
  host.available_bytes = MeminfoBytes(meminfo, "MemAvailable");
  host.source = "MemTotal";
  if (host.total_bytes <= 0) {
    return absl::UnavailableError("/proc/meminfo has no MemTotal");
  }
  if (host.available_bytes < 0) host.available_bytes = host.total_bytes;
  // cgroup v2: "max" or a byte count.
  int64_t limit = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(
                           ReadSmallFile("/sys/fs/cgroup/memory.max")),
                       &limit) &&
      limit > 0 && limit < host.total_bytes) {
    host.total_bytes = limit;
    host.available_bytes = std::min(host.available_bytes, limit);
    host.source = "cgroup memory.max";
  }
  return host;
}

absl::StatusOr<ProcessMemory> ReadProcessMemory() {
  const std::string status = ReadSmallFile("/proc/self/status");
  ProcessMemory process;
  process.rss_bytes = MeminfoBytes(status, "VmRSS");
  process.hwm_bytes = MeminfoBytes(status, "VmHWM");
  if (process.rss_bytes < 0 || process.hwm_bytes < 0) {
    return absl::UnavailableError("/proc/self/status has no VmRSS or VmHWM");
  }
  return process;
}

}  // namespace mtb
