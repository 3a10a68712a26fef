// What a checkpoint save cannot beat on this machine: the disk's bandwidth
// measured around the page cache, and SHA-256's throughput in memory.
//
// A save writes every byte through the page cache, fsyncs it, and hashes it
// (on another thread while writing). Its ceiling is therefore the smaller of
//   - the disk: O_DIRECT writes (no page cache, no copy) of the same number
//     of bytes from a buffer of random bytes (zeros can be compressed or
//     skipped by a virtual disk), then fsync, `threads` writers in parallel,
//     each its own file and its share of the bytes; and
//   - SHA-256 of the same number of bytes in memory, `threads` hashers in
//     parallel, each its share.
// Both are wall-clock times from the first writer's (hasher's) start to the
// last one's end. A save measured faster than its ceiling by more than 10%
// means the ceiling did not bound it (a disk that drifted between the two
// measurements, a cache the ceiling missed): the ceiling is then invalid and
// the comparison says so rather than report a share above 100%.
#ifndef MTB_COMMON_BASE_DISK_CEILING_H_
#define MTB_COMMON_BASE_DISK_CEILING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mtb {

struct DiskCeilingOptions {
  std::string directory;  // on the disk the checkpoints go to; must exist
  int64_t bytes = 0;      // in all, split evenly across the threads
  int threads = 1;        // parallel writers and hashers (the save's ranks)
  // Each thread writes its share in blocks of this size (a multiple of 4096,
  // as O_DIRECT needs); its random buffer is one block, written repeatedly.
  int64_t block_bytes = 4 << 20;
  // Keep the written files (e.g. to time a cold read of them); their paths are
  // in DiskCeiling::files and the caller deletes them. Else they are deleted.
  bool keep_files = false;
};

struct DiskCeiling {
  int threads = 0;
  int64_t bytes = 0;            // written and hashed, in all (shares rounded up to 4096)
  double write_seconds = 0;     // O_DIRECT writes + fsync, first start to last end
  double sha256_seconds = 0;    // SHA-256 in memory, first start to last end
  std::vector<std::string> files;  // with keep_files

  double write_gbps() const;
  double sha256_gbps() const;
  // min(write_gbps, sha256_gbps): what a save of these bytes can reach.
  double ceiling_gbps() const;
  // "disk" or "sha256": which of the two bounds.
  const char* bound() const;
};

// Measures the ceiling. kInvalidArgument for bytes <= 0, threads < 1 or a
// block size that is not a positive multiple of 4096; kFailedPrecondition
// naming the directory when it is missing or does not take O_DIRECT (tmpfs);
// kInternal naming the file and errno when a write or fsync fails.
absl::StatusOr<DiskCeiling> MeasureDiskCeiling(const DiskCeilingOptions& options);

// A save of `bytes` in `seconds` against a ceiling measured in the same round.
struct CeilingVerdict {
  double save_gbps = 0;
  double share = 0;            // save_gbps / ceiling_gbps
  bool ceiling_valid = true;   // share <= 1 + kCeilingSlack
};
inline constexpr double kCeilingSlack = 0.10;
CeilingVerdict JudgeAgainstCeiling(const DiskCeiling& ceiling, int64_t bytes, double seconds);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_DISK_CEILING_H_
