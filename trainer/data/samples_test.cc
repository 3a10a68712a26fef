// The torch-free samples (trainer/data/samples.h): what the LibTorch trainer and the
// CUDA trainer both train on.
#include "trainer/data/samples.h"

#include <cstdint>
#include <vector>

#include "common/base/counter_rng.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

std::vector<int64_t> Rows(const SampleSource& source, int64_t step,
                          int64_t first, int64_t count) {
  std::vector<int64_t> tokens(count * (source.seq_len() + 1));
  source.Fill(step, first, count, tokens.data());
  return tokens;
}

// Pinned from the sampling as it stood when the CUDA trainer began using it:
// the CPU trainer's golden losses were made on these tokens, so a change here
// is a change of every result.
TEST(SyntheticSamples, FirstTokensArePinned) {
  const auto source = MakeSyntheticSamples(/*seed=*/1234, /*vocab_size=*/256,
                                           /*seq_len=*/8);
  EXPECT_EQ(Rows(*source, /*step=*/0, /*first=*/0, /*count=*/1),
            (std::vector<int64_t>{55, 217, 154, 254, 184, 22, 19, 232, 180}));
  EXPECT_EQ(Rows(*source, /*step=*/7, /*first=*/3, /*count=*/1),
            (std::vector<int64_t>{234, 226, 241, 17, 205, 190, 232, 116, 250}));
}

TEST(SyntheticSamples, ASliceOfTheBatchIsThoseRowsOfTheWholeBatch) {
  const auto source = MakeSyntheticSamples(5, 50, 16);
  const std::vector<int64_t> whole = Rows(*source, 3, 0, 6);
  const std::vector<int64_t> slice = Rows(*source, 3, 2, 3);
  EXPECT_EQ(slice, std::vector<int64_t>(whole.begin() + 2 * 17,
                                        whole.begin() + 5 * 17));
  // Negative: another step is another batch.
  EXPECT_NE(Rows(*source, 4, 2, 3), slice);
}

TEST(TokenSamples, RowIsTheWindowAtTheKeyedStart) {
  std::vector<uint16_t> tokens(100);
  for (int i = 0; i < 100; ++i) tokens[i] = static_cast<uint16_t>(i);
  auto source = MakeTokenSamples(tokens, "counting", 9, 128, 10);
  ASSERT_TRUE(source.ok()) << source.status();
  const std::vector<int64_t> row = Rows(**source, 2, 5, 1);
  const int64_t start = static_cast<int64_t>(CounterBelow(
      CounterKey({9, static_cast<uint64_t>(RngStream::kData), 2, 5}), 0, 90));
  for (int64_t t = 0; t <= 10; ++t) EXPECT_EQ(row[t], start + t);
  EXPECT_EQ(start, 27);
}

TEST(TokenSamples, TokenOutsideTheVocabularyIsInvalidArgument) {
  auto source = MakeTokenSamples({1, 2, 300, 4}, "mem", 1, 256, 2);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(source.status().message().find("--vocab_size=256"),
            std::string::npos);
}

}  // namespace
}  // namespace mtb
