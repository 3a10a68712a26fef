#include "common/libtorch/matmul_peak.h"

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(MatmulPeak, MeasuresEveryFp32LibraryAtEveryShape) {
  const std::vector<GemmShape> shapes = {{64, 96, 32}, {33, 17, 65}};
  const std::vector<GemmSpeed> speeds = MeasureGemms("fp32", shapes, 1);
  ASSERT_EQ(speeds.size(), 4u);  // onednn and blas, two shapes each
  for (const GemmSpeed& speed : speeds) {
    EXPECT_GT(speed.flops_per_second, 0) << speed.Describe();
    EXPECT_EQ(speed.precision, "fp32");
  }
  EXPECT_EQ(speeds[0].Describe(), "onednn fp32 64x96x32");
  EXPECT_EQ(speeds[3].Describe(), "blas fp32 33x17x65");
}

TEST(MatmulPeak, Bf16IsLibTorchsOneDnnPath) {
  const std::vector<GemmSpeed> speeds = MeasureGemms("bf16", {{16, 16, 16}}, 1);
  ASSERT_EQ(speeds.size(), 1u);
  EXPECT_EQ(speeds[0].library, "libtorch");
}

TEST(MatmulPeak, FastestPicksTheMaximumOverallOrOfOneLibrary) {
  std::vector<GemmSpeed> speeds(3);
  speeds[0] = {"onednn", "fp32", {1, 1, 1}, 5};
  speeds[1] = {"blas", "fp32", {1, 1, 1}, 3};
  speeds[2] = {"blas", "fp32", {2, 2, 2}, 4};
  EXPECT_EQ(FastestGemm(speeds), &speeds[0]);
  EXPECT_EQ(FastestGemm(speeds, "blas"), &speeds[2]);
  EXPECT_EQ(FastestGemm(speeds, "mkl"), nullptr);
  EXPECT_EQ(FastestGemm({}), nullptr);
}

TEST(MatmulPeak, ModelShapesEndWithTheCubeReference) {
  const std::vector<GemmShape> shapes = ModelGemmShapes(512, 64, 256);
  ASSERT_EQ(shapes.size(), 6u);
  EXPECT_EQ(shapes[0].n, 192);  // fused QKV
  EXPECT_EQ(shapes[3].k, 256);  // MLP down
  EXPECT_EQ(shapes[4].n, 256);  // LM head
  EXPECT_EQ(shapes[5].m, 1024);
  // A huge batch measures at most kMaxGemmRows rows.
  EXPECT_EQ(ModelGemmShapes(int64_t{1} << 30, 64, 256)[0].m, kMaxGemmRows);
}

}  // namespace
}  // namespace mtb
