// Where result files go. Under `bazel run` the process runs in Bazel's runfiles
// folder, so relative paths the user typed resolve against the user's checkout
// (BUILD_WORKSPACE_DIRECTORY), as SPEC §1 asks.
#ifndef MTB_COMMON_RESULTS_OUTPUT_PATH_H_
#define MTB_COMMON_RESULTS_OUTPUT_PATH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mtb {

// Absolute paths are returned as they are; relative ones are joined to
// BUILD_WORKSPACE_DIRECTORY when it is set, else left relative to the working
// directory. Empty stays empty.
std::string ResolveUserPath(absl::string_view path);

// A new, not yet existing path "results/<tool>_<YYYYmmdd-HHMMSS>.<extension>"
// (resolved as above), adding "_2", "_3", ... when that name is taken, so a
// default output never overwrites an earlier result.
std::string DefaultResultPath(absl::string_view tool,
                              absl::string_view extension);

// `path` with its extension (after the last '.' of the file name) replaced by
// `extension` (given without the dot), or appended when it has none.
std::string ReplaceExtension(absl::string_view path,
                             absl::string_view extension);

// Checks, before any work starts, that a result can be written to
// `resolved_path` (the value of --`flag`, already resolved): creates its
// missing parent directories and checks the directory is writable and the
// path is not a directory. kInvalidArgument naming the flag and the reason,
// so a long run never fails at its very end. Empty paths pass (not asked for).
absl::Status CheckOutputWritable(absl::string_view flag,
                                 const std::string& resolved_path);

}  // namespace mtb

#endif  // MTB_COMMON_RESULTS_OUTPUT_PATH_H_
