#include "comm_bench/nccl_bootstrap.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/results/atomic_file.h"

namespace mtb::comm_bench {

absl::Status PublishNcclId(const std::string& path, absl::string_view id) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "NCCL id file ", path,
        " exists already (left by an earlier run?); remove it or give a new "
        "--nccl_id_file"));
  }
  return WriteFileAtomically(path, id);
}

absl::StatusOr<std::string> WaitForNcclId(const std::string& path,
                                          int expected_bytes,
                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    absl::StatusOr<std::string> id = ReadFileToString(path);
    // The file appears whole (written to a temporary name, then renamed).
    if (id.ok() && static_cast<int>(id->size()) == expected_bytes) return id;
    if (id.ok()) {
      return absl::DataLossError(absl::StrCat("NCCL id file ", path, " holds ",
                                              id->size(), " bytes, expected ",
                                              expected_bytes));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank 0 did not publish the NCCL id in ", path, " within ",
          absl::FormatDuration(timeout), " (", id.status().message(), ")"));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(100));
  }
}

}  // namespace mtb::comm_bench
