// The training samples, without LibTorch: the trainer's DataSource
// (trainer/data/data.h) and the CUDA trainer (trainer/cuda) both draw their tokens
// here, so the two see the same bits for any (step, sample).
//
// A step's global batch is the samples 0 .. global_batch - 1 of that step;
// sample g of step s is a pure function of (seed, s, g), drawn from the
// counter-based key
//
//   CounterKey({seed, kData, s, g})             (common/base/counter_rng.h)
//
// so any (step, sample) can be regenerated alone, and a rank that produces
// samples [first, first + count) sees exactly what one rank producing the whole
// global batch sees there, whatever the world size or micro-batching.
//
// synthetic: token t of the sample (t = 0 .. seq_len) is
//   CounterBelow(key, t, vocab_size)   (uniform over the vocabulary).
// token file: the sample is the window of seq_len + 1 tokens starting at
//   CounterBelow(key, 0, num_tokens - seq_len)   (every start is possible).
// Inputs are tokens 0 .. seq_len - 1 and targets tokens 1 .. seq_len.
#ifndef MTB_TRAINER_DATA_SAMPLES_H_
#define MTB_TRAINER_DATA_SAMPLES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// Thread-safe: every method is const and pure.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Writes samples [first_sample, first_sample + count) of optimizer step
  // `step` as a (count, seq_len + 1) row-major token matrix into `tokens`
  // (count * (seq_len + 1) values).
  virtual void Fill(int64_t step, int64_t first_sample, int64_t count,
                    int64_t* tokens) const = 0;
  virtual int64_t seq_len() const = 0;
  // One line for logs and reports, e.g. "synthetic (uniform over 256 tokens)".
  virtual std::string Describe() const = 0;
};

std::unique_ptr<SampleSource> MakeSyntheticSamples(uint64_t seed,
                                                   int64_t vocab_size,
                                                   int64_t seq_len);

// Reads the whole token file into memory. Errors: those of ReadTokenFile
// (kNotFound, kDataLoss) and kInvalidArgument when the file holds a token
// >= vocab_size or fewer than seq_len + 1 tokens.
absl::StatusOr<std::unique_ptr<SampleSource>> OpenTokenFileSamples(
    const std::string& path, uint64_t seed, int64_t vocab_size,
    int64_t seq_len);

// Samples from tokens in memory (tests, and what OpenTokenFileSamples builds
// on). Same errors as OpenTokenFileSamples' kInvalidArgument.
absl::StatusOr<std::unique_ptr<SampleSource>> MakeTokenSamples(
    std::vector<uint16_t> tokens, std::string name, uint64_t seed,
    int64_t vocab_size, int64_t seq_len);

// The samples `config` names: synthetic, or the token file at
// ResolveUserPath(config.data()) (common/results/output_path.h).
absl::StatusOr<std::unique_ptr<SampleSource>> OpenSamplesFor(
    const TrainConfig& config);

}  // namespace mtb

#endif  // MTB_TRAINER_DATA_SAMPLES_H_
