// SHA-256 digests (OpenSSL's libcrypto) for fingerprints and file checksums.
#ifndef MTB_COMMON_BASE_SHA256_H_
#define MTB_COMMON_BASE_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace mtb {

// The SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view data);

// The same over data given in pieces (hashing while writing, one pass over
// the bytes): Update any number of times, then FinishHex once.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void Update(absl::string_view data);
  std::string FinishHex();

 private:
  void* context_;  // EVP_MD_CTX, kept out of the header
};

}  // namespace mtb

#endif  // MTB_COMMON_BASE_SHA256_H_
