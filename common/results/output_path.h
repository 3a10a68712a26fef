// Where result files go. Under `bazel run` the process runs in Bazel's runfiles
// folder, so relative paths the user typed resolve against the user's checkout
// (BUILD_WORKSPACE_DIRECTORY).
#ifndef MTB_COMMON_RESULTS_OUTPUT_PATH_H_
#define MTB_COMMON_RESULTS_OUTPUT_PATH_H_

#include <string>

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
// `resolved_path` (the value of --`flag`, already resolved): creates its
// missing parent directories, refuses a directory, and creates and removes a
// temporary file beside it (permission bits alone miss read-only mounts, ACLs
// and full quotas; nothing is left behind). kInvalidArgument naming the flag
// and the reason, so a long run never fails at its very end. Empty paths pass
// (not asked for).
absl::Status CheckOutputWritable(absl::string_view flag,
                                 const std::string& resolved_path);

// The same for a directory a tool writes files into (--checkpoint_dir):
// creates it and its parents, refuses a file, probes with a temporary file.
absl::Status CheckDirectoryWritable(absl::string_view flag,
                                    const std::string& resolved_directory);

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
