#include "trainer/data/data.h"

#include <utility>

#include "ATen/ATen.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "trainer/data/samples.h"

namespace mtb {
namespace {

// The samples of a SampleSource as a (count, seq_len + 1) int64 matrix split
// into inputs and targets.
class TensorDataSource : public DataSource {
 public:
  explicit TensorDataSource(std::unique_ptr<SampleSource> samples)
      : samples_(std::move(samples)) {}

  Batch Get(int64_t step, int64_t first_sample, int64_t count) const override {
    CHECK_GE(first_sample, 0);
    CHECK_GE(count, 1);
    const int64_t seq_len = samples_->seq_len();
    at::Tensor tokens = at::empty({count, seq_len + 1}, at::kLong);
    samples_->Fill(step, first_sample, count, tokens.data_ptr<int64_t>());
    Batch batch;
    for (int64_t row = 0; row < count; ++row) {
      batch.sample_indices.push_back(first_sample + row);
    }
    batch.inputs = tokens.slice(1, 0, seq_len).contiguous();
    batch.targets = tokens.slice(1, 1, seq_len + 1).contiguous();
    return batch;
  }

  std::string Describe() const override { return samples_->Describe(); }

 private:
  std::unique_ptr<SampleSource> samples_;
};

}  // namespace

std::unique_ptr<DataSource> TensorData(std::unique_ptr<SampleSource> samples) {
  return std::make_unique<TensorDataSource>(std::move(samples));
}

absl::StatusOr<std::unique_ptr<DataSource>> TensorData(
    absl::StatusOr<std::unique_ptr<SampleSource>> samples) {
  RETURN_IF_ERROR(samples.status());
  return TensorData(*std::move(samples));
}

}  // namespace mtb
