#include "trainer/checkpoint/shard_file.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace mtb::checkpoint {
namespace {

void PutU32(std::string* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t GetU32(absl::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return value;
}

}  // namespace

std::string EncodeShardHeader(const ShardHeader& header) {
  std::string out(kShardMagic, sizeof(kShardMagic));
  PutU32(&out, header.format_version);
  PutU32(&out, header.rank);
  PutU32(&out, header.tensor_count);
  PutU32(&out, 0);  // reserved
  return out;
}

absl::StatusOr<ShardHeader> DecodeShardHeader(absl::string_view bytes,
                                              const std::string& path) {
  if (static_cast<int64_t>(bytes.size()) < kShardHeaderBytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: ", bytes.size(),
                                            " bytes, shorter than the ",
                                            kShardHeaderBytes, "-byte header"));
  }
  if (std::memcmp(bytes.data(), kShardMagic, sizeof(kShardMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": bad magic: not a checkpoint shard file"));
  }
  ShardHeader header;
  header.format_version = GetU32(bytes, 8);
  header.rank = GetU32(bytes, 12);
  header.tensor_count = GetU32(bytes, 16);
  if (header.format_version != kFormatVersion) {
    return absl::DataLossError(absl::StrCat(path, ": format version ", header.format_version,
                                            ", this build reads version ", kFormatVersion));
  }
  return header;
}

}  // namespace mtb::checkpoint
