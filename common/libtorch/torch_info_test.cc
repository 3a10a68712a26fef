#include "common/libtorch/torch_info.h"

#include "ATen/Parallel.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(TorchInfo, RecordsVersionsAndTheThreadCountsInEffect) {
  at::set_num_threads(2);
  RunContext context;
  FillTorchInfo(&context);
  EXPECT_EQ(context.libtorch_version().substr(0, 4), "1.13");
  EXPECT_EQ(context.gloo_version(), "0.5.0");
  EXPECT_EQ(context.intra_op_threads(), 2);
  EXPECT_GT(context.inter_op_threads(), 0);
  at::set_num_threads(1);
  FillTorchInfo(&context);
  EXPECT_EQ(context.intra_op_threads(), 1);
}

TEST(TorchInfo, NamesTheBlasLibraryMappedIntoTheProcess) {
  const std::string blas = DescribeBlasLibrary();
  // LibTorch links libblas.so.3; the bootstrap installs OpenBLAS as its
  // Debian alternative.
  EXPECT_NE(blas.find("libblas.so.3"), std::string::npos) << blas;
  EXPECT_NE(blas.find("OpenBLAS"), std::string::npos) << blas;
}

}  // namespace
}  // namespace mtb
