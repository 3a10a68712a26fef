#include <vector>

#include "common/gemm/backend.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/tests/golden.h"

namespace mtb {
namespace {

// The golden file of each GEMM backend: their products sum in different
// orders, so their losses differ in the last bits.
void ExpectGoldenLosses(gemm::Backend backend, const std::string& path) {
  gemm::ScopedBackend scoped(backend);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::vector<double>> golden = ParseGoldenLosses(*text);
  ASSERT_TRUE(golden.ok()) << golden.status();
  ASSERT_EQ(golden->size(), 5u);
  absl::StatusOr<std::vector<double>> losses = TrainLosses(GoldenConfig());
  ASSERT_TRUE(losses.ok()) << losses.status();
  ASSERT_EQ(losses->size(), golden->size());
  for (size_t i = 0; i < golden->size(); ++i) {
    // On the machine that wrote the file the losses are bit-identical; 1e-5
    // relative leaves room for another BLAS build's summation order, far
    // below what any change to the model, data or optimizer moves.
    EXPECT_NEAR((*losses)[i], (*golden)[i], 1e-5 * (*golden)[i])
        << "step " << i + 1 << "; regenerate deliberately with: bazel run "
        << "//trainer:golden_losses -- --gemm=" << gemm::BackendName(backend)
        << " > " << path;
  }
}

TEST(GoldenLosses, SeededTinyModelReproducesThePinnedFirstLosses) {
  ExpectGoldenLosses(gemm::Backend::kBlas, "testdata/golden_losses_tiny.txt");
}

TEST(GoldenLosses, OneDnnGemmsReproduceTheirOwnPinnedFirstLosses) {
  ExpectGoldenLosses(gemm::Backend::kOneDnn,
                     "testdata/golden_losses_tiny_onednn.txt");
}

TEST(GoldenLosses, FileFormatRoundTrips) {
  const std::vector<double> losses = {4.1588830833596715, 3.25};
  absl::StatusOr<std::vector<double>> parsed =
      ParseGoldenLosses(FormatGoldenLosses(losses));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, losses);
  EXPECT_EQ(ParseGoldenLosses("1 4.0\n3 2.0\n").status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace mtb
