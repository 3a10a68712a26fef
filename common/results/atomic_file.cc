#include "common/results/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mtb {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

absl::Status ErrnoStatus(int error, absl::string_view what,
                         absl::string_view path) {
  std::string message = absl::StrCat(what, " ", path, ": ", ErrnoText(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status WriteAll(int fd, absl::string_view contents,
                      const std::string& path) {
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open directory", directory);
  int result = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (result != 0) return ErrnoStatus(error, "fsync directory", directory);
  return absl::OkStatus();
}

}  // namespace

absl::Status CreateDirectories(const std::string& directory) {
  if (directory.empty() || directory == "." || directory == "/") {
    return absl::OkStatus();
  }
  struct stat info;
  if (::stat(directory.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(directory, " exists and is not a directory"));
  }
  absl::Status parent = CreateDirectories(DirectoryOf(directory));
  if (!parent.ok()) return parent;
  if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, "mkdir", directory);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents,
                                 const AtomicWriteOptions& options) {
  if (path.empty()) return absl::InvalidArgumentError("empty output path");
  const std::string directory = DirectoryOf(path);
  if (options.create_parent_directories) {
    absl::Status created = CreateDirectories(directory);
    if (!created.ok()) return created;
  }
  static std::atomic<int> counter{0};
  const std::string temp_path =
      absl::StrCat(directory, "/.", BaseName(path), ".tmp.", ::getpid(), ".",
                   counter.fetch_add(1));
  int fd = ::open(temp_path.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "create", temp_path);
  absl::Status status = WriteAll(fd, contents, temp_path);
  if (status.ok() && ::fsync(fd) != 0) {
    status = ErrnoStatus(errno, "fsync", temp_path);
  }
  if (::close(fd) != 0 && status.ok()) {
    status = ErrnoStatus(errno, "close", temp_path);
  }
  if (!status.ok()) {
    ::unlink(temp_path.c_str());
    return status;
  }
  if (options.stop_before_rename_for_test) return absl::OkStatus();
  if (::rename(temp_path.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(temp_path.c_str());
    return ErrnoStatus(error, "rename to", path);
  }
  return SyncDirectory(directory);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      ::close(fd);
      return absl::DataLossError(
          absl::StrCat("read ", path, ": ", ErrnoText(error)));
    }
    if (got == 0) break;
    contents.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return contents;
}

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool PathExists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

absl::StatusOr<std::vector<std::string>> ListDirectory(
    const std::string& directory, absl::string_view prefix,
    absl::string_view suffix) {
  DIR* listing = ::opendir(directory.c_str());
  if (listing == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        directory, ": cannot list it (", std::strerror(errno), ")"));
  }
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (absl::StartsWith(name, prefix) && absl::EndsWith(name, suffix)) {
      names.push_back(name);
    }
  }
  ::closedir(listing);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace mtb
