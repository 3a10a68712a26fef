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

Sha256Hasher::Sha256Hasher() : context_(EVP_MD_CTX_new()) {
  CHECK(context_ != nullptr);
  CHECK_EQ(EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(),
                             nullptr),
           1);
}

Sha256Hasher::~Sha256Hasher() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_));
}

void Sha256Hasher::Update(absl::string_view data) {
  CHECK_EQ(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data.data(),
                            data.size()),
           1);
}

std::string Sha256Hasher::FinishHex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  CHECK_EQ(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest, &length), 1);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace mtb
