// How comm_bench_nccl's ranks agree on NCCL's unique id without LibTorch's
// TCPStore (the NCCL binary links no LibTorch): rank 0 writes the id
// to a file, atomically, and the other ranks wait for it to appear. The
// launcher of comm_bench_nccl gives every rank a file in a fresh private
// folder (MTB_NCCL_ID_FILE); ranks started by another launcher across nodes
// need --nccl_id_file on a filesystem every node sees, fresh for each run.
// CUDA-free, so it is tested in the default build.
#ifndef MTB_COMM_BENCH_NCCL_BOOTSTRAP_H_
#define MTB_COMM_BENCH_NCCL_BOOTSTRAP_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mtb::comm_bench {

// The environment variable the launcher sets for its ranks.
inline constexpr char kNcclIdFileEnv[] = "MTB_NCCL_ID_FILE";

// Rank 0: writes `id` to `path`. kAlreadyExists when the file is there already
// (another run's id: the other ranks might have read it), naming the path.
absl::Status PublishNcclId(const std::string& path, absl::string_view id);

// Other ranks: polls `path` until it holds `expected_bytes` bytes and returns
// them. kDeadlineExceeded after `timeout`, naming the path and rank 0.
absl::StatusOr<std::string> WaitForNcclId(const std::string& path,
                                          int expected_bytes,
                                          absl::Duration timeout);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_NCCL_BOOTSTRAP_H_
