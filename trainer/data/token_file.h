// llm.c's token file format: a header of 256 little-endian int32 (magic
// 20240520, version 1, token count, the rest zero) followed by that many
// little-endian uint16 tokens. Torch-free (the converter uses it).
#ifndef MTB_TRAINER_DATA_TOKEN_FILE_H_
#define MTB_TRAINER_DATA_TOKEN_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int kTokenFileHeaderInts = 256;
inline constexpr int kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

// Parses a whole file's bytes. kDataLoss, with `path` and the numbers, for a
// short header, a bad magic number, an unknown version, an odd number of token
// bytes, or a token count that disagrees with the header.
absl::StatusOr<std::vector<uint16_t>> ParseTokenFile(absl::string_view bytes,
                                                     absl::string_view path);

// Reads and parses; kNotFound when the file does not exist.
absl::StatusOr<std::vector<uint16_t>> ReadTokenFile(const std::string& path);

// The file's bytes for `tokens`.
std::string EncodeTokenFile(const std::vector<uint16_t>& tokens);

// Byte-level tokenisation (vocabulary 256): one token per byte.
std::vector<uint16_t> BytesToTokens(absl::string_view text);

}  // namespace mtb

#endif  // MTB_TRAINER_DATA_TOKEN_FILE_H_
