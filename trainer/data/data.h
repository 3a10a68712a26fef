// Deterministic training data as LibTorch tensors: the samples of
// trainer/data/samples.h (which defines what sample g of step s is) split into
// inputs and targets.
#ifndef MTB_TRAINER_DATA_DATA_H_
#define MTB_TRAINER_DATA_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "trainer/train_result.pb.h"

namespace mtb {

struct Batch {
  at::Tensor inputs;   // (batch, seq_len) int64
  at::Tensor targets;  // (batch, seq_len) int64
  // (batch): the global sample index of each row within its step.
  std::vector<int64_t> sample_indices;
};

// Thread-safe: Get is const and pure.
class DataSource {
 public:
  virtual ~DataSource() = default;
  // Samples [first_sample, first_sample + count) of optimizer step `step`.
  virtual Batch Get(int64_t step, int64_t first_sample,
                    int64_t count) const = 0;
  // One line for logs and reports, e.g. "synthetic (uniform over 256 tokens)".
  virtual std::string Describe() const = 0;
};

std::unique_ptr<DataSource> MakeSyntheticData(uint64_t seed, int64_t vocab_size,
                                              int64_t seq_len);

// Reads the whole token file into memory. Errors: those of ReadTokenFile
// (kNotFound, kDataLoss) and kInvalidArgument when the file holds a token
// >= vocab_size or fewer than seq_len + 1 tokens.
absl::StatusOr<std::unique_ptr<DataSource>> OpenTokenFileData(
    const std::string& path, uint64_t seed, int64_t vocab_size,
    int64_t seq_len);

// A data source in memory (tests, and what OpenTokenFileData builds on).
absl::StatusOr<std::unique_ptr<DataSource>> MakeTokenData(
    std::vector<uint16_t> tokens, std::string name, uint64_t seed,
    int64_t vocab_size, int64_t seq_len);

// The data source `config` names: synthetic, or the token file at
// ResolveUserPath(config.data()) (common/results/output_path.h).
absl::StatusOr<std::unique_ptr<DataSource>> OpenDataFor(
    const TrainConfig& config);

}  // namespace mtb

#endif  // MTB_TRAINER_DATA_DATA_H_
