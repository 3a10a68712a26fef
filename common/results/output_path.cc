#include "common/results/output_path.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"

namespace mtb {

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

// Creates and removes a temporary file in `directory`, or, when it does not
// exist yet, in its nearest existing ancestor (where the writer will create
// it): "" when that worked, else the reason. Creates no directory: a run
// that is refused later must leave nothing behind.
std::string ProbeDirectory(const std::string& directory) {
  std::string existing = directory;
  while (!PathExists(existing)) {
    const std::string parent = DirectoryOf(existing);
    if (parent == existing) break;
    existing = parent;
  }
  struct stat info;
  if (::stat(existing.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::StrCat(existing, " is not a directory");
  }
  std::string probe = absl::StrCat(existing, "/.mtb_write_check_XXXXXX");
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return absl::StrCat("cannot create a file in ", existing, " (",
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
  // A full disk still lets the probe create its empty file: the result
  // would be lost at the end of the run.
  return CheckFreeSpace(flag, resolved_path, kMinFreeBytesForResults);
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

std::vector<NamedPath> ResultFileSet(const std::string& result_path,
                                     const std::vector<std::string>& companion_extensions) {
  std::vector<NamedPath> files = {{"--out", result_path}};
  for (const std::string& extension : companion_extensions) {
    files.push_back({absl::StrCat("the .", extension, " beside --out"),
                     ReplaceExtension(result_path, extension)});
  }
  return files;
}

std::string RankTracePath(const std::string& trace_dir, int rank) {
  return absl::StrCat(trace_dir, "/rank_", rank, ".trace.json");
}

std::vector<NamedPath> RankTraceFiles(const std::string& trace_dir, int world_size) {
  std::vector<NamedPath> files;
  if (trace_dir.empty()) return files;
  for (int rank = 0; rank < world_size; ++rank) {
    files.push_back({absl::StrCat("rank ", rank, "'s trace in --trace_dir"),
                     RankTracePath(trace_dir, rank)});
  }
  return files;
}

std::string NormalPath(const std::string& path) {
  std::string absolute = path;
  if (absolute.empty() || absolute[0] != '/') {
    char cwd[PATH_MAX];
    absolute = absl::StrCat(::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".", "/", path);
  }
  // Lexically first (so "new/../x" does not depend on "new" existing), then
  // the longest existing prefix through realpath.
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(absolute, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.emplace_back(part);
  }
  for (size_t keep = parts.size(); keep > 0; --keep) {
    const std::string prefix =
        absl::StrCat("/", absl::StrJoin(parts.begin(), parts.begin() + keep, "/"));
    char resolved[PATH_MAX];
    if (::realpath(prefix.c_str(), resolved) == nullptr) continue;
    std::string out = resolved;
    for (size_t i = keep; i < parts.size(); ++i) {
      absl::StrAppend(&out, out == "/" ? "" : "/", parts[i]);
    }
    return out;
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

bool SameFileOrPath(const std::string& a, const std::string& b) {
  const bool a_exists = PathExists(a), b_exists = PathExists(b);
  if (a_exists && b_exists) return SameFile(a, b);
  return a_exists == b_exists && NormalPath(a) == NormalPath(b);
}

absl::Status CheckOutputsAgainstInputs(const std::vector<NamedPath>& outputs,
                                       const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& output = outputs[i];
    if (output.path.empty()) continue;
    for (const NamedPath& input : inputs) {
      if (input.path.empty() || !SameFileOrPath(output.path, input.path)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          output.role, "=", output.path, " is the same file as ", input.role, " (",
          input.path, "): refusing to overwrite an input; choose another output path"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (outputs[j].path.empty() || !SameFileOrPath(output.path, outputs[j].path)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          output.role, "=", output.path, " and ", outputs[j].role, "=", outputs[j].path,
          " are the same file: one would overwrite the other; give them different paths"));
    }
  }
  return absl::OkStatus();
}

std::string Mebibytes(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

absl::StatusOr<int64_t> FreeBytesAt(const std::string& path) {
  std::string probe = NormalPath(path);
  while (!PathExists(probe) && probe != "/") probe = DirectoryOf(probe);
  struct statvfs info;
  if (::statvfs(probe.c_str(), &info) != 0) {
    return absl::InternalError(
        absl::StrCat(probe, ": statvfs: ", std::strerror(errno)));
  }
  return static_cast<int64_t>(info.f_bavail) * static_cast<int64_t>(info.f_frsize);
}

absl::Status CheckFreeSpace(absl::string_view flag, const std::string& path,
                            int64_t needed_bytes) {
  if (path.empty() || needed_bytes <= 0) return absl::OkStatus();
  absl::StatusOr<int64_t> free_bytes = FreeBytesAt(path);
  if (!free_bytes.ok()) return absl::OkStatus();  // unknown: the write reports
  if (*free_bytes >= needed_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, "=", path, ": not enough free space: it needs ", Mebibytes(needed_bytes),
      ", the file system has ", Mebibytes(*free_bytes), " free"));
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
