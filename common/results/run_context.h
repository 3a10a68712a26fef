// Provenance for result files. Torch-free, so binaries that must not
// link LibTorch (comm_bench_nccl) use it too; common/libtorch/torch_info.h adds the
// LibTorch-side facts.
#ifndef MTB_COMMON_RESULTS_RUN_CONTEXT_H_
#define MTB_COMMON_RESULTS_RUN_CONTEXT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "common/results/results.pb.h"

namespace mtb {

// Fills everything a process can tell about itself without LibTorch: tool,
// argv, git commit and dirty flag (read now, by running git in the user's
// checkout), build mode, compiler, protobuf version, CPU, host, OS and the start
// time. world_size and backend are the caller's to set.
RunContext NewRunContext(absl::string_view tool, int argc, char** argv);

// Stamps end_time_utc. Call right before writing the result.
void FinishRunContext(RunContext* context);

// A new run's id, "<host>-<pid>-<UTC yyyymmddThhmmss>-<8 random hex>":
// unique on a host. Rank 0 makes it and shares it (traces, checkpoints).
std::string NewRunId();

// The current time as RFC 3339 UTC with millisecond precision.
std::string NowUtcRfc3339();

// The directory git commands run in: BUILD_WORKSPACE_DIRECTORY when set (bazel
// run), else the working directory.
std::string CheckoutDirectory();

}  // namespace mtb

#endif  // MTB_COMMON_RESULTS_RUN_CONTEXT_H_
