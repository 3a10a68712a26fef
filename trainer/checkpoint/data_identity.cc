#include "trainer/checkpoint/data_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/sha256.h"
#include "common/results/output_path.h"

namespace mtb::checkpoint {
namespace {

constexpr int64_t kHeadBytes = int64_t{1} << 20;
constexpr int64_t kBlockBytes = int64_t{64} << 10;
constexpr int kBlocks = 64;
constexpr size_t kChunkBytes = size_t{8} << 20;

// Reads [at, at + length) of `fd` into `hasher`.
absl::Status HashRange(int fd, int64_t at, int64_t length, const std::string& path,
                       Sha256Hasher* hasher) {
  std::string buffer(static_cast<size_t>(std::min<int64_t>(length, kChunkBytes)), '\0');
  while (length > 0) {
    const ssize_t n = ::pread(fd, buffer.data(),
                              static_cast<size_t>(std::min<int64_t>(length, buffer.size())), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat(path, ": read: ",
                                              n == 0 ? "shorter than its size" : std::strerror(errno)));
    }
    hasher->Update(absl::string_view(buffer.data(), static_cast<size_t>(n)));
    at += n;
    length -= n;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DataIdentity> IdentifyData(const TrainConfig& config, bool full,
                                          int64_t full_digest_max_bytes) {
  DataIdentity identity;
  if (config.data() == "synthetic") {
    identity.set_kind("synthetic");
    identity.set_parameters(absl::StrCat("seed=", config.seed(), " vocab_size=",
                                         config.vocab_size(), " seq_len=", config.seq_len()));
    return identity;
  }
  const std::string path = ResolveUserPath(config.data());
  identity.set_kind("token_file");
  identity.set_path(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": not found"));
    return absl::InternalError(absl::StrCat(path, ": open: ", std::strerror(errno)));
  }
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat(path, ": stat: ", std::strerror(errno)));
  }
  const int64_t size = info.st_size;
  identity.set_size(size);
  // llm.c's header: int32 magic, version, token count (trainer/data/token_file.h).
  unsigned char header[12] = {0};
  if (::pread(fd, header, sizeof(header), 0) == static_cast<ssize_t>(sizeof(header))) {
    identity.set_tokens(static_cast<int64_t>(header[8]) | static_cast<int64_t>(header[9]) << 8 |
                        static_cast<int64_t>(header[10]) << 16 |
                        static_cast<int64_t>(header[11]) << 24);
  }
  Sha256Hasher hasher;
  absl::Status read = absl::OkStatus();
  if (full || size <= full_digest_max_bytes) {
    identity.set_digest_kind("sha256");
    read = HashRange(fd, 0, size, path, &hasher);
  } else {
    identity.set_digest_kind("sampled-sha256");
    hasher.Update(absl::StrCat(size, "\n"));
    read = HashRange(fd, 0, kHeadBytes, path, &hasher);
    for (int i = 0; i < kBlocks && read.ok(); ++i) {
      read = HashRange(fd, i * (size - kBlockBytes) / (kBlocks - 1), kBlockBytes, path, &hasher);
    }
  }
  ::close(fd);
  if (!read.ok()) return read;
  identity.set_digest(hasher.FinishHex());
  return identity;
}

std::vector<std::string> DataDifferences(const DataIdentity& saved, const DataIdentity& now) {
  std::vector<std::string> differences;
  auto differ = [&](const std::string& what, const std::string& a, const std::string& b) {
    if (a != b) differences.push_back(absl::StrCat(what, ": checkpoint ", a, ", this run ", b));
  };
  differ("data kind", saved.kind(), now.kind());
  if (!differences.empty()) return differences;
  // Synthetic data's parameters are configuration fields (--seed,
  // --vocab_size, --seq_len), compared and named as such by the caller.
  if (saved.kind() == "synthetic") return differences;
  differ("token file size", absl::StrCat(saved.size(), " bytes"), absl::StrCat(now.size(), " bytes"));
  differ("token count", absl::StrCat(saved.tokens()), absl::StrCat(now.tokens()));
  if (saved.digest_kind() == now.digest_kind()) {
    differ(absl::StrCat("token file ", saved.digest_kind()), saved.digest(), now.digest());
  }
  return differences;
}

std::string DescribeData(const DataIdentity& identity) {
  if (identity.kind() == "synthetic") return absl::StrCat("synthetic data (", identity.parameters(), ")");
  return absl::StrCat("token file ", identity.path(), ": ", identity.size(), " bytes, ",
                      identity.tokens(), " tokens, ", identity.digest_kind(), " ",
                      identity.digest().substr(0, 16), "...");
}

}  // namespace mtb::checkpoint
