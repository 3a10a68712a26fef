#include "trainer/data/token_file.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/results/atomic_file.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

std::string WithHeaderInt(std::string bytes, int index, int32_t value) {
  std::memcpy(bytes.data() + 4 * index, &value, 4);
  return bytes;
}

TEST(TokenFile, RoundTripsTokensThroughLlmCsLayout) {
  const std::vector<uint16_t> tokens = {0, 1, 255, 256, 65535};
  const std::string bytes = EncodeTokenFile(tokens);
  ASSERT_EQ(bytes.size(), 1024u + 10u);
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof(header));
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 5);
  absl::StatusOr<std::vector<uint16_t>> parsed = ParseTokenFile(bytes, "x.bin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, tokens);
}

void ExpectDataLoss(const std::string& bytes, const std::string& substring) {
  const absl::StatusOr<std::vector<uint16_t>> parsed =
      ParseTokenFile(bytes, "corpus.bin");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(parsed.status().message().find("corpus.bin"), std::string::npos);
  EXPECT_NE(parsed.status().message().find(substring), std::string::npos)
      << parsed.status().message();
}

TEST(TokenFile, ShortHeaderIsDataLoss) {
  ExpectDataLoss(EncodeTokenFile({1, 2}).substr(0, 1000),
                 "1000 bytes, shorter than its 1024-byte header");
}

TEST(TokenFile, BadMagicIsDataLoss) {
  ExpectDataLoss(WithHeaderInt(EncodeTokenFile({1, 2}), 0, 20240519),
                 "bad magic number 20240519");
}

TEST(TokenFile, UnknownVersionIsDataLoss) {
  ExpectDataLoss(WithHeaderInt(EncodeTokenFile({1, 2}), 1, 2),
                 "version 2 is not supported");
}

TEST(TokenFile, OddTokenBytesAreDataLoss) {
  ExpectDataLoss(EncodeTokenFile({1, 2}) + "x", "5 bytes after the header is odd");
}

TEST(TokenFile, CountDisagreeingWithTheHeaderIsDataLoss) {
  ExpectDataLoss(WithHeaderInt(EncodeTokenFile({1, 2, 3}), 2, 4),
                 "header says 4 tokens but the file holds 3");
}

TEST(TokenFile, MissingFileIsNotFound) {
  EXPECT_EQ(ReadTokenFile("/nonexistent/corpus.bin").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TokenFile, BytesAreTokensOfAByteLevelVocabulary) {
  EXPECT_EQ(BytesToTokens(std::string("a\xff\0", 3)),
            (std::vector<uint16_t>{97, 255, 0}));
}

// The shipped corpus is exactly what make_token_file writes for the texts in
// testdata/gnu_licenses, in the order of testdata/README.md.
TEST(TokenFile, ShippedCorpusIsTheConverterOutputOfItsSources) {
  std::string text;
  for (const char* name : {"GPL-1", "GPL-2", "GPL-3", "LGPL-2", "LGPL-2.1",
                           "LGPL-3", "GFDL-1.3"}) {
    absl::StatusOr<std::string> source = ReadFileToString(
        std::string("testdata/gnu_licenses/") + name + ".txt");
    ASSERT_TRUE(source.ok()) << source.status();
    text += *source;
  }
  absl::StatusOr<std::string> shipped =
      ReadFileToString("testdata/gnu_licenses.bin");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_TRUE(*shipped == EncodeTokenFile(BytesToTokens(text)));
  EXPECT_LE(shipped->size() + text.size(), 500u * 1024u);
}

}  // namespace
}  // namespace mtb
