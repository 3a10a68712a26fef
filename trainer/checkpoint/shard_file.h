// A rank's shard file: a 24-byte header (magic "MTBCKPT\0", format version,
// rank, tensor count, all little-endian u32 after the magic), then the
// tensors' raw little-endian bytes back to back. The manifest records where
// each tensor's bytes are; the header lets a reader reject a foreign or
// newer file before trusting any offset.
#ifndef MTB_TRAINER_CHECKPOINT_SHARD_FILE_H_
#define MTB_TRAINER_CHECKPOINT_SHARD_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb::checkpoint {

inline constexpr char kShardMagic[8] = {'M', 'T', 'B', 'C', 'K', 'P', 'T', '\0'};
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr int64_t kShardHeaderBytes = 24;

struct ShardHeader {
  uint32_t format_version = kFormatVersion;
  uint32_t rank = 0;
  uint32_t tensor_count = 0;
};

std::string EncodeShardHeader(const ShardHeader& header);

// kDataLoss naming `path` for a short file, bad magic or an unknown version.
absl::StatusOr<ShardHeader> DecodeShardHeader(absl::string_view bytes,
                                              const std::string& path);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_SHARD_FILE_H_
