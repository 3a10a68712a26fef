// SHA-256 digests (OpenSSL's libcrypto) for fingerprints and file checksums.
#ifndef MTB_COMMON_BASE_SHA256_H_
#define MTB_COMMON_BASE_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace mtb {

// The SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view data);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_SHA256_H_
