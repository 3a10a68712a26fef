#include "trainer/data/samples.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/counter_rng.h"
#include "common/base/status.h"
#include "common/results/output_path.h"
#include "glog/logging.h"
#include "trainer/data/token_file.h"

namespace mtb {
namespace {

uint64_t SampleKey(uint64_t seed, int64_t step, int64_t sample) {
  return CounterKey({seed, static_cast<uint64_t>(RngStream::kData),
                     static_cast<uint64_t>(step),
                     static_cast<uint64_t>(sample)});
}

// Fills a (count, seq_len + 1) token matrix row by row with `fill(key, row)`.
template <typename FillRow>
void FillRows(uint64_t seed, int64_t step, int64_t first_sample, int64_t count,
              int64_t seq_len, int64_t* tokens, FillRow fill_row) {
  CHECK_GE(first_sample, 0);
  CHECK_GE(count, 1);
  for (int64_t row = 0; row < count; ++row) {
    fill_row(SampleKey(seed, step, first_sample + row),
             tokens + row * (seq_len + 1));
  }
}

class SyntheticSamples : public SampleSource {
 public:
  SyntheticSamples(uint64_t seed, int64_t vocab_size, int64_t seq_len)
      : seed_(seed), vocab_size_(vocab_size), seq_len_(seq_len) {}

  void Fill(int64_t step, int64_t first_sample, int64_t count,
            int64_t* tokens) const override {
    FillRows(seed_, step, first_sample, count, seq_len_, tokens,
             [this](uint64_t key, int64_t* row) {
               for (int64_t t = 0; t <= seq_len_; ++t) {
                 row[t] = static_cast<int64_t>(
                     CounterBelow(key, t, vocab_size_));
               }
             });
  }
  int64_t seq_len() const override { return seq_len_; }
  std::string Describe() const override {
    return absl::StrCat("synthetic (uniform over ", vocab_size_, " tokens)");
  }

 private:
  uint64_t seed_;
  int64_t vocab_size_;
  int64_t seq_len_;
};

class TokenSamples : public SampleSource {
 public:
  TokenSamples(std::vector<uint16_t> tokens, std::string name, uint64_t seed,
               int64_t seq_len)
      : tokens_(std::move(tokens)),
        name_(std::move(name)),
        seed_(seed),
        seq_len_(seq_len) {}

  void Fill(int64_t step, int64_t first_sample, int64_t count,
            int64_t* tokens) const override {
    const uint64_t starts = tokens_.size() - seq_len_;  // >= 1
    FillRows(seed_, step, first_sample, count, seq_len_, tokens,
             [this, starts](uint64_t key, int64_t* row) {
               const uint64_t start = CounterBelow(key, 0, starts);
               for (int64_t t = 0; t <= seq_len_; ++t) {
                 row[t] = tokens_[start + t];
               }
             });
  }
  int64_t seq_len() const override { return seq_len_; }
  std::string Describe() const override {
    return absl::StrCat(name_, " (", tokens_.size(), " tokens)");
  }

 private:
  std::vector<uint16_t> tokens_;
  std::string name_;
  uint64_t seed_;
  int64_t seq_len_;
};

}  // namespace

std::unique_ptr<SampleSource> MakeSyntheticSamples(uint64_t seed,
                                                   int64_t vocab_size,
                                                   int64_t seq_len) {
  return std::make_unique<SyntheticSamples>(seed, vocab_size, seq_len);
}

absl::StatusOr<std::unique_ptr<SampleSource>> MakeTokenSamples(
    std::vector<uint16_t> tokens, std::string name, uint64_t seed,
    int64_t vocab_size, int64_t seq_len) {
  if (static_cast<int64_t>(tokens.size()) < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " holds ", tokens.size(), " tokens; --seq_len=", seq_len,
        " needs at least ", seq_len + 1));
  }
  const uint16_t largest = *std::max_element(tokens.begin(), tokens.end());
  if (largest >= vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab_size=", vocab_size, " is too small for ", name,
                     ": it holds token ", largest));
  }
  return std::unique_ptr<SampleSource>(std::make_unique<TokenSamples>(
      std::move(tokens), std::move(name), seed, seq_len));
}

absl::StatusOr<std::unique_ptr<SampleSource>> OpenTokenFileSamples(
    const std::string& path, uint64_t seed, int64_t vocab_size,
    int64_t seq_len) {
  ASSIGN_OR_RETURN(std::vector<uint16_t> tokens, ReadTokenFile(path));
  return MakeTokenSamples(std::move(tokens), path, seed, vocab_size, seq_len);
}

absl::StatusOr<std::unique_ptr<SampleSource>> OpenSamplesFor(
    const TrainConfig& config) {
  if (config.data() == "synthetic") {
    return MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                config.seq_len());
  }
  return OpenTokenFileSamples(ResolveUserPath(config.data()), config.seed(),
                              config.vocab_size(), config.seq_len());
}

}  // namespace mtb
