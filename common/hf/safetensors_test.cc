#include "common/hf/safetensors.h"

#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace mtb::hf {
namespace {

std::string Floats(std::initializer_list<float> values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.begin(), bytes.size());
  return bytes;
}

std::string TwoTensors() {
  absl::StatusOr<std::string> file =
      EncodeSafetensors({{"b.weight", "F32", {2, 3}, Floats({1, 2, 3, 4, 5, 6})},
                         {"a.bias", "BF16", {3}, std::string("\x80\x3f\x00\x40\x40\x40", 6)}},
                        {{"format", "pt"}});
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *file : "";
}

void ExpectDataLoss(const std::string& bytes, const std::string& substring) {
  absl::StatusOr<SafetensorsFile> file = DecodeSafetensors(bytes, "x.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(file.status().message(),
                                "x.safetensors: not a valid "
                                "safetensors file"))
      << file.status();
  EXPECT_TRUE(absl::StrContains(file.status().message(), substring)) << file.status();
}

TEST(Safetensors, TheLayoutIsLengthThenJsonThenAlignedData) {
  const std::string bytes = TwoTensors();
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);  // little-endian on x86, as the format
  EXPECT_EQ((8 + length) % 8, 0u) << "data starts 8-byte aligned";
  EXPECT_EQ(bytes.substr(8, length),
            std::string("{\"__metadata__\":{\"format\":\"pt\"},"
                        "\"b.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                        "\"a.bias\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]}}")
                .append(length - 156, ' '));
  EXPECT_EQ(bytes.size(), 8 + length + 30);
}

TEST(Safetensors, WhatIsWrittenReadsBackAndEqualInputsGiveEqualBytes) {
  absl::StatusOr<SafetensorsFile> file = DecodeSafetensors(TwoTensors(), "x.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata.at("format"), "pt");
  ASSERT_EQ(file->tensors.size(), 2u);
  const SafetensorsFile::Entry* weight = file->Find("b.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->dtype, "F32");
  EXPECT_EQ(weight->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(file->Data(*weight), Floats({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(file->Data(*file->Find("a.bias")), std::string("\x80\x3f\x00\x40\x40\x40", 6));
  EXPECT_EQ(file->Find("missing"), nullptr);
  EXPECT_EQ(TwoTensors(), TwoTensors());
}

TEST(Safetensors, TheWriterRefusesDataThatDoesNotMatchTheShape) {
  absl::StatusOr<std::string> file = EncodeSafetensors({{"w", "F32", {2, 2}, Floats({1, 2})}}, {});
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(file.status().message(),
                                "w: 8 bytes, but shape [2,2] of F32 "
                                "needs 16"))
      << file.status();
  EXPECT_FALSE(EncodeSafetensors({{"w", "Q4", {1}, "x"}}, {}).ok());
  EXPECT_FALSE(
      EncodeSafetensors({{"w", "F32", {1}, Floats({1})}, {"w", "F32", {1}, Floats({1})}}, {}).ok());
}

TEST(Safetensors, ByteLevelCorruptionIsDataLossNamingTheFile) {
  const std::string good = TwoTensors();
  ExpectDataLoss(good.substr(0, 5), "5 bytes, shorter than 8");
  ExpectDataLoss(good.substr(0, good.size() - 1),
                 "the tensors cover 30 data bytes but the file has 29");
  ExpectDataLoss(good + "x", "the tensors cover 30 data bytes but the file has 31");
  std::string huge_header = good;
  huge_header[7] = '\x01';
  ExpectDataLoss(huge_header, "the header claims");
  std::string not_json = good;
  not_json[8] = '[';
  ExpectDataLoss(not_json, "the header is not a JSON object");
  std::string bad_shape = good;
  bad_shape.replace(bad_shape.find("[2,3]"), 5, "[3,3]");
  ExpectDataLoss(bad_shape,
                 "b.weight: data_offsets [0, 24] hold 24 bytes, but shape [3,3] of F32 "
                 "needs 36");
  std::string hole = good;
  hole.replace(hole.find("[24,30]"), 7, "[26,32]");
  ExpectDataLoss(hole, "a.bias starts at data offset 26 but the previous tensor ends at 24");
  std::string dtype = good;
  dtype.replace(dtype.find("\"F32\""), 5, "\"F99\"");
  ExpectDataLoss(dtype, "b.weight: unknown dtype 'F99'");
}

TEST(Safetensors, AMissingFileIsNotFound) {
  absl::StatusOr<SafetensorsFile> file = ReadSafetensors("/nonexistent/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mtb::hf
