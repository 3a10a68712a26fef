// The disk ceiling (disk_ceiling.h). Vocabulary: a *share* is one thread's
// part of the bytes (rounded up to 4096, O_DIRECT's alignment); each thread
// writes its share from one *block* of random bytes (aligned to 4096),
// written again and again, to its own file opened with O_DIRECT, then
// fsyncs it; then hashes its share in memory from the same block. The write
// and the hash phases are timed separately, each from a common start (all
// threads released together) to the last thread's end.
#include "common/base/disk_ceiling.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "common/base/sha256.h"

namespace mtb {
namespace {

constexpr int64_t kAlignment = 4096;

using Clock = std::chrono::steady_clock;

struct AlignedFree {
  void operator()(char* p) const { std::free(p); }
};

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// One thread's block of random bytes (each thread its own seed).
std::unique_ptr<char, AlignedFree> RandomBlock(int64_t block_bytes, int thread) {
  void* memory = nullptr;
  if (::posix_memalign(&memory, kAlignment, static_cast<size_t>(block_bytes)) != 0) {
    return nullptr;
  }
  std::mt19937_64 generator(0x6d7462ull + static_cast<uint64_t>(thread));
  auto* words = static_cast<uint64_t*>(memory);
  for (int64_t i = 0; i < block_bytes / 8; ++i) words[i] = generator();
  return std::unique_ptr<char, AlignedFree>(static_cast<char*>(memory));
}

struct ThreadResult {
  absl::Status status;
  Clock::time_point write_end, hash_end;
};

absl::Status WriteShare(const std::string& path, const char* block, int64_t block_bytes,
                        int64_t share) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EINVAL) {
      return absl::FailedPreconditionError(absl::StrCat(
          "disk ceiling: ", path, ": the file system does not take O_DIRECT (tmpfs?); "
          "measure on the disk the checkpoints go to"));
    }
    return absl::InternalError(
        absl::StrCat("disk ceiling: cannot create ", path, ": ", std::strerror(errno)));
  }
  int64_t written = 0;
  while (written < share) {
    const int64_t want = std::min(block_bytes, share - written);
    const ssize_t n = ::pwrite(fd, block, static_cast<size_t>(want), written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("disk ceiling: O_DIRECT write to ", path,
                                              " at byte ", written, " failed: ",
                                              std::strerror(saved)));
    }
    written += n;
  }
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    return absl::InternalError(
        absl::StrCat("disk ceiling: fsync of ", path, " failed: ", std::strerror(saved)));
  }
  ::close(fd);
  return absl::OkStatus();
}

void HashShare(const char* block, int64_t block_bytes, int64_t share) {
  Sha256Hasher hasher;
  for (int64_t done = 0; done < share;) {
    const int64_t n = std::min(block_bytes, share - done);
    hasher.Update(absl::string_view(block, static_cast<size_t>(n)));
    done += n;
  }
  (void)hasher.FinishHex();
}

}  // namespace

double DiskCeiling::write_gbps() const {
  return write_seconds > 0 ? static_cast<double>(bytes) / write_seconds / 1e9 : 0;
}
double DiskCeiling::sha256_gbps() const {
  return sha256_seconds > 0 ? static_cast<double>(bytes) / sha256_seconds / 1e9 : 0;
}
double DiskCeiling::ceiling_gbps() const { return std::min(write_gbps(), sha256_gbps()); }
const char* DiskCeiling::bound() const {
  return write_gbps() <= sha256_gbps() ? "disk" : "sha256";
}

absl::StatusOr<DiskCeiling> MeasureDiskCeiling(const DiskCeilingOptions& options) {
  if (options.bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk ceiling: bytes must be > 0, not ", options.bytes));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk ceiling: threads must be >= 1, not ", options.threads));
  }
  if (options.block_bytes <= 0 || options.block_bytes % kAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "disk ceiling: block_bytes ", options.block_bytes, " is not a positive multiple of ",
        kAlignment, " (O_DIRECT's alignment)"));
  }
  struct stat info;
  if (::stat(options.directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("disk ceiling: ", options.directory, " is not a directory"));
  }
  const int threads = options.threads;
  const int64_t share = RoundUp((options.bytes + threads - 1) / threads, kAlignment);
  const int64_t block_bytes = std::min(options.block_bytes, share);

  std::vector<std::unique_ptr<char, AlignedFree>> blocks;
  std::vector<std::string> files;
  for (int t = 0; t < threads; ++t) {
    blocks.push_back(RandomBlock(block_bytes, t));
    if (blocks.back() == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("disk ceiling: cannot allocate a ", block_bytes, "-byte block"));
    }
    files.push_back(absl::StrCat(options.directory, "/.mtb_disk_ceiling_", ::getpid(), "_",
                                 threads, "_", t, ".bin"));
  }

  // Every thread starts writing together, then hashing together.
  absl::Barrier* before_write = new absl::Barrier(threads + 1);
  absl::Barrier* before_hash = new absl::Barrier(threads + 1);
  std::vector<ThreadResult> results(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      if (before_write->Block()) delete before_write;
      results[t].status = WriteShare(files[t], blocks[t].get(), block_bytes, share);
      results[t].write_end = Clock::now();
      if (before_hash->Block()) delete before_hash;
      HashShare(blocks[t].get(), block_bytes, share);
      results[t].hash_end = Clock::now();
    });
  }
  const Clock::time_point write_start = Clock::now();
  if (before_write->Block()) delete before_write;
  // The hash phase starts once every writer is done (the barrier waits for
  // them); its clock starts when the last one arrived.
  if (before_hash->Block()) delete before_hash;
  const Clock::time_point hash_start = Clock::now();
  for (std::thread& worker : workers) worker.join();

  DiskCeiling ceiling;
  ceiling.threads = threads;
  ceiling.bytes = share * threads;
  Clock::time_point write_end = write_start, hash_end = hash_start;
  absl::Status status;
  for (const ThreadResult& result : results) {
    if (!result.status.ok() && status.ok()) status = result.status;
    write_end = std::max(write_end, result.write_end);
    hash_end = std::max(hash_end, result.hash_end);
  }
  if (!status.ok() || !options.keep_files) {
    for (const std::string& file : files) ::unlink(file.c_str());
  }
  if (!status.ok()) return status;
  ceiling.write_seconds = std::chrono::duration<double>(write_end - write_start).count();
  ceiling.sha256_seconds = std::chrono::duration<double>(hash_end - hash_start).count();
  if (options.keep_files) ceiling.files = files;
  return ceiling;
}

CeilingVerdict JudgeAgainstCeiling(const DiskCeiling& ceiling, int64_t bytes, double seconds) {
  CeilingVerdict verdict;
  verdict.save_gbps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  const double ceiling_gbps = ceiling.ceiling_gbps();
  verdict.share = ceiling_gbps > 0 ? verdict.save_gbps / ceiling_gbps : 0;
  verdict.ceiling_valid = ceiling_gbps > 0 && verdict.share <= 1 + kCeilingSlack;
  return verdict;
}

}  // namespace mtb
