// Where result files go. Under `bazel run` the process runs in Bazel's runfiles
// folder, so relative paths the user typed resolve against the user's checkout
// (BUILD_WORKSPACE_DIRECTORY).
#ifndef MTB_COMMON_RESULTS_OUTPUT_PATH_H_
#define MTB_COMMON_RESULTS_OUTPUT_PATH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
// `resolved_path` (the value of --`flag`, already resolved): refuses a
// directory, and creates and removes a temporary file in its directory, or
// in the nearest existing ancestor of a directory the writer will create
// (permission bits alone miss read-only mounts, ACLs and full quotas).
// Nothing is left behind and no directory is created: a run refused later
// creates nothing. kInvalidArgument naming the flag and the reason, so a
// long run never fails at its very end. Empty paths pass (not asked for).
// It also refuses a file system with less than kMinFreeBytesForResults free
// (a full disk lets the probe through, then loses the finished result).
inline constexpr int64_t kMinFreeBytesForResults = int64_t{1} << 20;
absl::Status CheckOutputWritable(absl::string_view flag,
                                 const std::string& resolved_path);

// The same for a directory a tool writes files into (--checkpoint_dir):
// refuses a file, probes it (or its nearest existing ancestor) with a
// temporary file; creates nothing.
absl::Status CheckDirectoryWritable(absl::string_view flag,
                                    const std::string& resolved_directory);

// A path a run reads or writes, named the way the user gave it ("--out",
// "--data", "input 2", "trace rank_0.trace.json"), for the overlap check.
struct NamedPath {
  std::string role;
  std::string path;
};

// What a tool writes for --out=`result_path`: the result itself ("--out")
// and each companion beside it (ReplaceExtension with each extension:
// "md", "svg", "time.svg"), for CheckOutputsAgainstInputs.
std::vector<NamedPath> ResultFileSet(const std::string& result_path,
                                     const std::vector<std::string>& companion_extensions);

// DIR/rank_<rank>.trace.json: where each rank writes its trace (common/trace).
std::string RankTracePath(const std::string& trace_dir, int rank);
// Every rank's trace file under --trace_dir=`trace_dir` (none when empty).
std::vector<NamedPath> RankTraceFiles(const std::string& trace_dir, int world_size);

// `path` made absolute and normal: the longest existing prefix with its
// symlinks resolved (realpath), then the rest with "." and ".." applied and
// repeated slashes folded, so two spellings of one file that does not exist
// yet compare equal. Relative paths are taken against the working directory.
std::string NormalPath(const std::string& path);

// Whether `a` and `b` name the same file, by any spelling: the same device
// and inode when both exist (symlinks followed, hard links included), else
// the same NormalPath.
bool SameFileOrPath(const std::string& a, const std::string& b);

// Refuses, before any work, an output that would overwrite an input (the
// same file by any spelling, symlink or hard link) and two outputs of one
// run that are the same file: kInvalidArgument, one line naming both roles
// and paths. Empty paths are skipped (not asked for). Nothing is touched.
absl::Status CheckOutputsAgainstInputs(const std::vector<NamedPath>& outputs,
                                       const std::vector<NamedPath>& inputs);

// The bytes free to an unprivileged writer on the file system that holds
// `path` (or would: its nearest existing parent), from statvfs.
absl::StatusOr<int64_t> FreeBytesAt(const std::string& path);

// "12.5 MiB".
std::string Mebibytes(int64_t bytes);

// kInvalidArgument naming the flag, the path and both sizes when the file
// system holding `path` has fewer than `needed_bytes` free.
absl::Status CheckFreeSpace(absl::string_view flag, const std::string& path,
                            int64_t needed_bytes);

// Companions: the Markdown report and SVG plot a tool writes beside its
// --out (r.json -> r.md, r.svg) without the user naming them. A rerun with
// the same --out replaces its own companions, but a file the user did not
// name and that this result did not write (notes.md beside notes.json, say)
// is never overwritten. Each companion carries a marker comment naming its
// result's file name; that is how "written for this --out" is recognised.

// "<!-- mtb companion of r.json -->" for `result_path` .../r.json.
std::string CompanionMarker(absl::string_view result_path);

// `content` (Markdown or SVG: both take HTML/XML comments) with the marker
// as its first line (after an XML declaration, if any).
std::string WithCompanionMarker(absl::string_view content,
                                absl::string_view result_path);

// Writes `content` (marked) to `companion_path` atomically when it does not
// exist or already carries `result_path`'s marker. Otherwise leaves it alone
// and returns the sentence saying so ("kept r.md: it exists and was not
// written for r.json"); an empty string when written.
absl::StatusOr<std::string> WriteCompanionFile(
    const std::string& companion_path, const std::string& result_path,
    absl::string_view content);

}  // namespace mtb

#endif  // MTB_COMMON_RESULTS_OUTPUT_PATH_H_
