#include "common/base/byte_size.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mtb {

absl::StatusOr<int64_t> ParseByteSize(absl::string_view flag,
                                      absl::string_view text) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", text, ": ", why,
        "; expected a whole number of bytes with an optional K, M or G suffix "
        "(powers of 1024), e.g. 4096, 1K, 64M"));
  };
  if (text.empty()) return invalid("empty");
  int64_t multiplier = 1;
  absl::string_view digits = text;
  switch (absl::ascii_toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      multiplier = int64_t{1} << 10;
      break;
    case 'M':
      multiplier = int64_t{1} << 20;
      break;
    case 'G':
      multiplier = int64_t{1} << 30;
      break;
    default:
      break;
  }
  if (multiplier != 1) digits.remove_suffix(1);
  if (digits.empty()) return invalid("no number before the suffix");
  if (digits.front() == '-') return invalid("negative");
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t value = 0;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return invalid(absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
    value = value * 10 + (c - '0');
    if (value > kLimit) return invalid("too large");
  }
  if (value > kLimit / multiplier) return invalid("too large");
  return value * multiplier;
}

}  // namespace mtb
