#include "trainer/data/token_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "common/base/status.h"

namespace mtb {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token files are little-endian; this code reads them in place");

int32_t HeaderInt(absl::string_view bytes, int index) {
  int32_t value;
  std::memcpy(&value, bytes.data() + 4 * index, 4);
  return value;
}

}  // namespace

absl::StatusOr<std::vector<uint16_t>> ParseTokenFile(absl::string_view bytes,
                                                     absl::string_view path) {
  if (bytes.size() < static_cast<size_t>(kTokenFileHeaderBytes)) {
    return absl::DataLossError(absl::StrCat(
        path, ": token file is ", bytes.size(), " bytes, shorter than its ",
        kTokenFileHeaderBytes, "-byte header (256 int32)"));
  }
  const int32_t magic = HeaderInt(bytes, 0);
  if (magic != kTokenFileMagic) {
    return absl::DataLossError(absl::StrCat(
        path, ": bad magic number ", magic, " (expected ", kTokenFileMagic,
        ": not an llm.c token file)"));
  }
  const int32_t version = HeaderInt(bytes, 1);
  if (version != kTokenFileVersion) {
    return absl::DataLossError(absl::StrCat(path, ": token file version ",
                                            version, " is not supported (",
                                            kTokenFileVersion, " is)"));
  }
  const size_t payload = bytes.size() - kTokenFileHeaderBytes;
  if (payload % 2 != 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": ", payload,
        " bytes after the header is odd; tokens are 2-byte uint16"));
  }
  const int64_t declared = HeaderInt(bytes, 2);
  if (declared < 0 || static_cast<size_t>(declared) != payload / 2) {
    return absl::DataLossError(absl::StrCat(path, ": header says ", declared,
                                            " tokens but the file holds ",
                                            payload / 2));
  }
  std::vector<uint16_t> tokens(payload / 2);
  std::memcpy(tokens.data(), bytes.data() + kTokenFileHeaderBytes, payload);
  return tokens;
}

absl::StatusOr<std::vector<uint16_t>> ReadTokenFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path));
  return ParseTokenFile(bytes, path);
}

std::string EncodeTokenFile(const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(kTokenFileHeaderInts, 0);
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::string bytes(kTokenFileHeaderBytes + 2 * tokens.size(), '\0');
  std::memcpy(bytes.data(), header.data(), kTokenFileHeaderBytes);
  std::memcpy(bytes.data() + kTokenFileHeaderBytes, tokens.data(),
              2 * tokens.size());
  return bytes;
}

std::vector<uint16_t> BytesToTokens(absl::string_view text) {
  std::vector<uint16_t> tokens;
  tokens.reserve(text.size());
  for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

}  // namespace mtb
