// Crash-safe file writes: a reader sees the previous file or the complete new
// one, never a prefix: a crash mid-write never publishes a half-written
// file.
#ifndef MTB_COMMON_RESULTS_ATOMIC_FILE_H_
#define MTB_COMMON_RESULTS_ATOMIC_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

struct AtomicWriteOptions {
  // Creates missing parent directories (like mkdir -p).
  bool create_parent_directories = true;
  // Test hook: stop after the temporary file is written and synced, as a crash
  // before the rename would. The temporary file is left for the test to see.
  bool stop_before_rename_for_test = false;
};

// Writes `contents` to a temporary file in the same directory (".<name>.tmp.
// <pid>.<n>"), fsyncs it, renames it over `path` and fsyncs the directory.
// Errors name the path and the failing step; on error `path` is untouched.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents,
                                 const AtomicWriteOptions& options = {});

// Reads a whole file. kNotFound when it does not exist, kPermissionDenied when
// it cannot be opened, kDataLoss when reading fails part-way.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Path helpers shared by every tool: the part after the last '/' (the whole
// path when there is none), the part before it ("." when there is none, "/"
// for a file at the root), and whether anything exists at `path` (stat).
std::string BaseName(const std::string& path);
std::string DirectoryOf(const std::string& path);
bool PathExists(const std::string& path);
// Whether `a` and `b` are the same existing file or directory (device and
// inode), however the two paths are spelled.
bool SameFile(const std::string& a, const std::string& b);

// The names (not paths) in `directory` that start with `prefix` and end with
// `suffix`, sorted. kInvalidArgument naming it when it cannot be listed.
absl::StatusOr<std::vector<std::string>> ListDirectory(
    const std::string& directory, absl::string_view prefix = "",
    absl::string_view suffix = "");

// Creates `directory` and its missing parents.
absl::Status CreateDirectories(const std::string& directory);

}  // namespace mtb

#endif  // MTB_COMMON_RESULTS_ATOMIC_FILE_H_
