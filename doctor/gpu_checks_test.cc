#include "doctor/gpu_checks.h"

#include "gtest/gtest.h"

namespace mtb::doctor {
namespace {

TEST(GpuChecks, AWorkingGpuPassesEveryCheck) {
  RunContext cuda;
  cuda.set_cuda_driver_version("13.0");
  cuda.set_cuda_runtime_version("13.0");
  cuda.set_nccl_version("2.27.3");
  cuda.add_gpu_names("NVIDIA H200");
  const std::vector<DoctorCheck> checks = GpuChecks(cuda);
  ASSERT_EQ(checks.size(), 4u);
  for (const DoctorCheck& check : checks) EXPECT_EQ(check.status(), "pass") << check.name();
  EXPECT_EQ(checks[3].value(), "1 visible: NVIDIA H200");
}

TEST(GpuChecks, NoDriverAndNoDeviceFailWithTheFix) {
  RunContext cuda;
  cuda.set_cuda_driver_version("unavailable (no CUDA driver)");
  cuda.set_cuda_runtime_version("13.0");
  cuda.set_nccl_version("2.27.3");
  const std::vector<DoctorCheck> checks = GpuChecks(cuda);
  EXPECT_EQ(checks[0].status(), "fail");
  EXPECT_NE(checks[0].fix().find("nvidia-smi"), std::string::npos);
  EXPECT_EQ(checks[3].status(), "fail");
  EXPECT_EQ(checks[3].value(), "no visible GPU");
}

}  // namespace
}  // namespace mtb::doctor
