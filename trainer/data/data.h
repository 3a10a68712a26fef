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
#include "trainer/data/samples.h"
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

// The samples of `samples` as tensors, each row's global sample index with
// it. Where the samples come from (synthetic, a token file, tokens in memory,
// the source a config names) and the errors of opening them are samples.h's
// factories': wrap their result, e.g.
//   TensorData(OpenSamplesFor(config))
std::unique_ptr<DataSource> TensorData(std::unique_ptr<SampleSource> samples);
absl::StatusOr<std::unique_ptr<DataSource>> TensorData(
    absl::StatusOr<std::unique_ptr<SampleSource>> samples);

}  // namespace mtb

#endif  // MTB_TRAINER_DATA_DATA_H_
