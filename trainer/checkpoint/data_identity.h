// The identity of a run's data source, recorded in every checkpoint and
// compared on resume (docs/checkpoint.md, "Data identity"): a resume that
// reads another corpus is not the same run, whatever its flags say.
// Torch-free: a token file is identified by its bytes, not parsed.
#ifndef MTB_TRAINER_CHECKPOINT_DATA_IDENTITY_H_
#define MTB_TRAINER_CHECKPOINT_DATA_IDENTITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/checkpoint/checkpoint.pb.h"
#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {

// Token files up to this size are hashed whole; larger ones are
// fingerprinted (DataIdentity.digest_kind "sampled-sha256") unless `full`.
inline constexpr int64_t kFullDigestMaxBytes = int64_t{256} << 20;

// The identity of the data `config` names (synthetic, or the token file at
// ResolveUserPath(config.data())). `full`: hash the whole file whatever its
// size (--data_fingerprint=full). kNotFound / kDataLoss naming the file when
// it cannot be read.
// `full_digest_max_bytes`: the size up to which a file is hashed whole
// (tests lower it).
absl::StatusOr<DataIdentity> IdentifyData(const TrainConfig& config, bool full,
                                          int64_t full_digest_max_bytes = kFullDigestMaxBytes);

// One "what: checkpoint A, this run B" per difference that makes the data
// another source: kind, and for a token file its size, token count, digest
// (compared only when both digests are of the same kind). The path alone
// is no difference. Empty: the same data.
std::vector<std::string> DataDifferences(const DataIdentity& saved, const DataIdentity& now);

// "token file data/x.bin: 1048576 bytes, 523776 tokens, sha256 3f2a…" for
// logs and notes.
std::string DescribeData(const DataIdentity& identity);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_DATA_IDENTITY_H_
