#include "common/base/sha256.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "glog/logging.h"

namespace mtb {

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  CHECK_EQ(EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(),
                      nullptr),
           1);
  CHECK_EQ(length, 32u);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace mtb
