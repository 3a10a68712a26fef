#include "trainer/data/data.h"

#include <cstdio>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "common/base/counter_rng.h"
#include "gtest/gtest.h"
#include "trainer/data/token_file.h"

namespace mtb {
namespace {

// The global batch of a step assembled from `world_size` ranks' slices of
// `per_rank` samples each, in rank order.
at::Tensor Assemble(const DataSource& data, int64_t step, int world_size,
                    int64_t per_rank) {
  std::vector<at::Tensor> slices;
  for (int rank = 0; rank < world_size; ++rank) {
    slices.push_back(data.Get(step, rank * per_rank, per_rank).inputs);
  }
  return at::cat(slices, 0);
}

TEST(SyntheticData, TokenIsTheDocumentedCounterDraw) {
  const auto data = TensorData(MakeSyntheticSamples(/*seed=*/11, /*vocab_size=*/50, 8));
  const Batch batch = data->Get(/*step=*/4, /*first_sample=*/6, 2);
  const uint64_t key =
      CounterKey({11, static_cast<uint64_t>(RngStream::kData), 4, 7});
  EXPECT_EQ(batch.inputs[1][3].item<int64_t>(),
            static_cast<int64_t>(CounterBelow(key, 3, 50)));
  EXPECT_EQ(batch.targets[1][7].item<int64_t>(),
            static_cast<int64_t>(CounterBelow(key, 8, 50)));
  EXPECT_EQ(batch.sample_indices, (std::vector<int64_t>{6, 7}));
}

TEST(SyntheticData, AnyStepAndSampleIsReproducibleAlone) {
  const auto data = TensorData(MakeSyntheticSamples(3, 64, 16));
  const Batch whole = data->Get(9, 0, 8);
  const Batch alone = data->Get(9, 5, 1);
  EXPECT_TRUE(at::equal(alone.inputs[0], whole.inputs[5]));
  EXPECT_TRUE(at::equal(alone.targets[0], whole.targets[5]));
  // Same request after other requests: still the same.
  data->Get(1, 0, 4);
  EXPECT_TRUE(at::equal(data->Get(9, 0, 8).inputs, whole.inputs));
  EXPECT_FALSE(at::equal(data->Get(10, 0, 8).inputs, whole.inputs));
  EXPECT_FALSE(at::equal(TensorData(MakeSyntheticSamples(4, 64, 16))->Get(9, 0, 8).inputs,
                         whole.inputs));
}

TEST(SyntheticData, TargetsAreInputsShiftedByOne) {
  const Batch batch = TensorData(MakeSyntheticSamples(3, 64, 16))->Get(1, 0, 2);
  EXPECT_TRUE(at::equal(batch.inputs.slice(1, 1), batch.targets.slice(1, 0, 15)));
}

TEST(SyntheticData, GlobalBatchIsIndependentOfTheWorldSize) {
  const auto data = TensorData(MakeSyntheticSamples(5, 256, 8));
  const at::Tensor one_rank = Assemble(*data, 2, 1, 12);
  for (int world_size : {2, 3, 4}) {
    EXPECT_TRUE(at::equal(Assemble(*data, 2, world_size, 12 / world_size),
                          one_rank))
        << "world size " << world_size;
  }
}

TEST(SyntheticData, TokensCoverTheVocabularyUniformly) {
  const Batch batch = TensorData(MakeSyntheticSamples(1, 8, 100))->Get(1, 0, 80);
  const at::Tensor counts = at::bincount(batch.inputs.reshape({-1}), {}, 8);
  // 8000 tokens over 8 values: 1000 each, sd ~30.
  EXPECT_LT((counts - 1000).abs().max().item<int64_t>(), 150);
}

std::vector<uint16_t> Ramp(int n, int modulo) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(static_cast<uint16_t>(i % modulo));
  return tokens;
}

TEST(TokenData, SamplesAreWindowsOfTheFileAtTheKeyedStart) {
  // Tokens t_i = i mod 251: a window is identified by its first token.
  const std::vector<uint16_t> tokens = Ramp(1000, 251);
  auto data = TensorData(MakeTokenSamples(tokens, "ramp", 21, 256, 10));
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch batch = (*data)->Get(3, 4, 1);
  const uint64_t key =
      CounterKey({21, static_cast<uint64_t>(RngStream::kData), 3, 4});
  const uint64_t start = CounterBelow(key, 0, 1000 - 10);
  for (int t = 0; t < 10; ++t) {
    EXPECT_EQ(batch.inputs[0][t].item<int64_t>(), tokens[start + t]);
    EXPECT_EQ(batch.targets[0][t].item<int64_t>(), tokens[start + t + 1]);
  }
}

TEST(TokenData, GlobalBatchIsIndependentOfTheWorldSizeAndReproducibleAlone) {
  auto data = TensorData(MakeTokenSamples(Ramp(5000, 256), "ramp", 2, 256, 32));
  ASSERT_TRUE(data.ok()) << data.status();
  const at::Tensor one_rank = Assemble(**data, 7, 1, 12);
  for (int world_size : {2, 3, 4}) {
    EXPECT_TRUE(at::equal(Assemble(**data, 7, world_size, 12 / world_size),
                          one_rank));
  }
  EXPECT_TRUE(at::equal((*data)->Get(7, 11, 1).inputs[0], one_rank[11]));
}

TEST(TokenData, TokenOutsideTheVocabularyIsInvalidArgument) {
  auto data = TensorData(MakeTokenSamples(Ramp(300, 256), "ramp", 1, 128, 8));
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find(
                "--vocab_size=128 is too small for ramp: it holds token 255"),
            std::string::npos)
      << data.status();
}

TEST(TokenData, FileShorterThanOneSampleIsInvalidArgument) {
  auto data = TensorData(MakeTokenSamples(Ramp(8, 256), "short", 1, 256, 8));
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("--seq_len=8 needs at least 9"),
            std::string::npos)
      << data.status();
}

TEST(TokenData, MalformedFileIsDataLossNamingThePath) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/bad_magic.bin";
  std::string bytes = EncodeTokenFile(Ramp(100, 256));
  bytes[0] ^= 1;
  FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
  auto data = TensorData(OpenTokenFileSamples(path, 1, 256, 8));
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(data.status().message().find(path), std::string::npos);
}

TEST(TokenData, ShippedCorpusOpensWithAByteVocabulary) {
  auto data = TensorData(OpenTokenFileSamples("testdata/gnu_licenses.bin", 1, 256, 128));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_NE((*data)->Describe().find("148391 tokens"), std::string::npos)
      << (*data)->Describe();
}

}  // namespace
}  // namespace mtb
