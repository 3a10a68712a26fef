#include "common/base/skew.h"

#include <cstdint>
#include <string>
#include <vector>

#include "common/results/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseSkew, AcceptsTheThreeKindsAndRoundTrips) {
  for (const char* text : {"uniform", "linear", "zipf:1.2", "zipf:0"}) {
    absl::StatusOr<Skew> skew = ParseSkew("imbalance", text);
    ASSERT_TRUE(skew.ok()) << skew.status();
    EXPECT_EQ(SkewToString(*skew), text);
  }
}

TEST(ParseSkew, RejectsJunkNamingTheFlag) {
  for (const char* text : {"", "zipf", "zipf:", "zipf:-1", "zipf:nan",
                           "zipf:inf", "Uniform", "gauss"}) {
    absl::StatusOr<Skew> skew = ParseSkew("imbalance", text);
    ASSERT_FALSE(skew.ok()) << text;
    EXPECT_EQ(skew.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(skew.status().message()), HasSubstr("--imbalance="));
  }
}

TEST(SkewWeights, MatchTheClosedForms) {
  EXPECT_THAT(SkewWeights({Skew::Kind::kUniform, 0}, 4),
              ElementsAre(0.25, 0.25, 0.25, 0.25));
  // linear: 1, 2, 3 over 6.
  std::vector<double> linear = SkewWeights({Skew::Kind::kLinear, 0}, 3);
  EXPECT_DOUBLE_EQ(linear[0], 1.0 / 6);
  EXPECT_DOUBLE_EQ(linear[2], 3.0 / 6);
  // zipf:1 over 3 ranks: 1, 1/2, 1/3 over 11/6.
  std::vector<double> zipf = SkewWeights({Skew::Kind::kZipf, 1}, 3);
  EXPECT_DOUBLE_EQ(zipf[0], 6.0 / 11);
  EXPECT_DOUBLE_EQ(zipf[1], 3.0 / 11);
  EXPECT_DOUBLE_EQ(zipf[2], 2.0 / 11);
}

TEST(SplitByWeights, PartsSumToTheTotalWithLargestRemaindersFirst) {
  // 10 over 1:1:1 -> 3.33 each; the leftover unit goes to index 0 (tie).
  EXPECT_THAT(SplitByWeights({1, 1, 1}, 10), ElementsAre(4, 3, 3));
  // 7 over 1:2 -> 2.33, 4.67: the remainder goes to the larger fraction.
  EXPECT_THAT(SplitByWeights({1, 2}, 7), ElementsAre(2, 5));
  EXPECT_THAT(SplitByWeights({0, 1}, 5), ElementsAre(0, 5));
  EXPECT_THAT(SplitByWeights({1, 1}, 0), ElementsAre(0, 0));
  for (int64_t total : std::vector<int64_t>{1, 17, 1000003, int64_t{1} << 40}) {
    std::vector<int64_t> parts =
        SplitByWeights(SkewWeights({Skew::Kind::kZipf, 1.3}, 7), total);
    int64_t sum = 0;
    for (int64_t part : parts) sum += part;
    EXPECT_EQ(sum, total);
  }
}

TEST(SkewedSplitMatrix, EveryRowSendsTheTotalAndReceiversAreSkewed) {
  SplitMatrix matrix = SkewedSplitMatrix({Skew::Kind::kLinear, 0}, 3, 600);
  EXPECT_THAT(RowSums(matrix), ElementsAre(600, 600, 600));
  EXPECT_THAT(matrix[1], ElementsAre(100, 200, 300));
  EXPECT_THAT(ColumnSums(matrix), ElementsAre(300, 600, 900));
}

TEST(ParseSplitMatrix, ReadsASquareMatrixWithComments) {
  absl::StatusOr<SplitMatrix> matrix =
      ParseSplitMatrix("# bytes\n0 8 16\n4 4 4  # row 1\n\n12 0 0\n", 3, 4, "m.txt");
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  EXPECT_THAT((*matrix)[0], ElementsAre(0, 8, 16));
  EXPECT_THAT(RowSums(*matrix), ElementsAre(24, 12, 12));
}

TEST(ParseSplitMatrix, WrongShapeNegativeOrUnalignedIsInvalidArgument) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : {Case{"4 4\n4 4\n", "2 entries, expected 3"},
                        Case{"4 4 4\n4 4 4\n", "2 rows, expected 3"},
                        Case{"4 4 4\n4 4 4\n4 4 4\n4 4 4\n", "more than 3 rows"},
                        Case{"4 4 4\n4 -4 4\n4 4 4\n", "[1][1] = '-4'"},
                        Case{"4 4 4\n4 x 4\n4 4 4\n", "not a non-negative"},
                        Case{"4 4 4\n4 4 4\n4 4 6\n", "not a multiple of the element size 4"}}) {
    absl::StatusOr<SplitMatrix> matrix = ParseSplitMatrix(c.text, 3, 4, "m.txt");
    ASSERT_FALSE(matrix.ok()) << c.text;
    EXPECT_EQ(matrix.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(matrix.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(matrix.status().message()), HasSubstr("m.txt"));
  }
}

TEST(ReadSplitMatrixFile, MissingFileIsNotFoundWithThePath) {
  absl::StatusOr<SplitMatrix> matrix =
      ReadSplitMatrixFile("/nonexistent/split.txt", 2, 4);
  ASSERT_FALSE(matrix.ok());
  EXPECT_EQ(matrix.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(matrix.status().message()), HasSubstr("/nonexistent/split.txt"));
}

}  // namespace
}  // namespace mtb
