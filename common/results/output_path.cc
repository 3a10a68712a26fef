#include "common/results/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"

namespace mtb {
namespace {

}  // namespace

std::string ResolveUserPath(absl::string_view path) {
  if (path.empty() || path[0] == '/') return std::string(path);
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace == nullptr || workspace[0] == '\0') return std::string(path);
  return absl::StrCat(workspace, "/", path);
}

std::string DefaultResultPath(absl::string_view tool,
                              absl::string_view extension) {
  const std::string stamp =
      absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::UTCTimeZone());
  const std::string stem =
      ResolveUserPath(absl::StrCat("results/", tool, "_", stamp));
  std::string candidate = absl::StrCat(stem, ".", extension);
  for (int suffix = 2; PathExists(candidate); ++suffix) {
    candidate = absl::StrCat(stem, "_", suffix, ".", extension);
  }
  return candidate;
}

std::string ReplaceExtension(absl::string_view path,
                             absl::string_view extension) {
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  if (dot == absl::string_view::npos ||
      (slash != absl::string_view::npos && dot < slash) ||
      dot == (slash == absl::string_view::npos ? 0 : slash + 1)) {
    return absl::StrCat(path, ".", extension);
  }
  return absl::StrCat(path.substr(0, dot), ".", extension);
}

namespace {

// Creates `directory` (and its parents) and a temporary file in it, then
// removes the file; "" when that worked, else the reason.
std::string ProbeDirectory(const std::string& directory) {
  if (absl::Status created = CreateDirectories(directory); !created.ok()) {
    return std::string(created.message());
  }
  std::string probe = absl::StrCat(directory, "/.mtb_write_check_XXXXXX");
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return absl::StrCat("cannot create a file in ", directory, " (",
                        std::strerror(errno), ")");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

}  // namespace

absl::Status CheckOutputWritable(absl::string_view flag,
                                 const std::string& resolved_path) {
  if (resolved_path.empty()) return absl::OkStatus();
  auto refuse = [&](absl::string_view reason) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", resolved_path, ": cannot write there: ", reason));
  };
  struct stat info;
  if (::stat(resolved_path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return refuse("it is a directory");
  }
  if (const std::string reason = ProbeDirectory(DirectoryOf(resolved_path));
      !reason.empty()) {
    return refuse(reason);
  }
  return absl::OkStatus();
}

absl::Status CheckDirectoryWritable(absl::string_view flag,
                                    const std::string& resolved_directory) {
  if (resolved_directory.empty()) return absl::OkStatus();
  struct stat info;
  std::string reason;
  if (::stat(resolved_directory.c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) {
    reason = "it is not a directory";
  } else {
    reason = ProbeDirectory(resolved_directory);
  }
  if (reason.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, "=", resolved_directory, ": cannot write there: ", reason));
}

std::string CompanionMarker(absl::string_view result_path) {
  return absl::StrCat("<!-- mtb companion of ", BaseName(std::string(result_path)),
                      " -->");
}

std::string WithCompanionMarker(absl::string_view content,
                                absl::string_view result_path) {
  const std::string marker = absl::StrCat(CompanionMarker(result_path), "\n");
  if (absl::StartsWith(content, "<?xml")) {
    const size_t end = content.find('\n');
    if (end != absl::string_view::npos) {
      return absl::StrCat(content.substr(0, end + 1), marker,
                          content.substr(end + 1));
    }
  }
  return absl::StrCat(marker, content);
}

absl::StatusOr<std::string> WriteCompanionFile(
    const std::string& companion_path, const std::string& result_path,
    absl::string_view content) {
  if (PathExists(companion_path)) {
    std::ifstream in(companion_path, std::ios::binary);
    std::string head(4096, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (head.find(CompanionMarker(result_path)) == std::string::npos) {
      return absl::StrCat("kept ", companion_path,
                          ": it exists and was not written for ",
                          result_path, " (remove it, or choose another --out)");
    }
  }
  RETURN_IF_ERROR(WriteFileAtomically(
      companion_path, WithCompanionMarker(content, result_path)));
  return std::string();
}

}  // namespace mtb
