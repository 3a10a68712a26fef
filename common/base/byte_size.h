// Byte counts as users type them on the command line: "4096", "1K", "64M",
// "2G" (K/M/G are powers of 1024, as in nccl-tests' -b/-e; lower case too).
// The inverse, for printing, is FormatBytes (common/report/report.h).
#ifndef MTB_COMMON_BASE_BYTE_SIZE_H_
#define MTB_COMMON_BASE_BYTE_SIZE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

// Parses a non-negative whole number of bytes with an optional K, M or G
// suffix. Anything else (empty, a sign, a fraction, spaces, another suffix,
// more than 2^62 bytes) is kInvalidArgument with a message naming `flag`
// (e.g. "--minbytes=1.5Q: ..."). Zero is accepted here; callers that need a
// positive size say so with their own rule.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view flag,
                                      absl::string_view text);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_BYTE_SIZE_H_
