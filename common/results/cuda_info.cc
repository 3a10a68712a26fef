#include "common/results/cuda_info.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "cuda_runtime_api.h"
#include "nccl.h"

namespace mtb {
namespace {

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string CudaVersionText(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

}  // namespace

void FillCudaInfo(RunContext* context) {
  int nccl_version = 0;
  if (ncclGetVersion(&nccl_version) == ncclSuccess) {
    // NCCL >= 2.9 encodes 10000 * major + 100 * minor + patch.
    context->set_nccl_version(absl::StrCat(nccl_version / 10000, ".",
                                           (nccl_version % 10000) / 100, ".",
                                           nccl_version % 100));
  }
  int runtime_version = 0;
  if (cudaRuntimeGetVersion(&runtime_version) == cudaSuccess) {
    context->set_cuda_runtime_version(CudaVersionText(runtime_version));
  }
  int driver_version = 0;
  cudaError_t driver_error = cudaDriverGetVersion(&driver_version);
  if (driver_error == cudaSuccess && driver_version > 0) {
    context->set_cuda_driver_version(CudaVersionText(driver_version));
  } else {
    context->set_cuda_driver_version("unavailable (no CUDA driver)");
  }
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess) return;
  for (int device = 0; device < device_count; ++device) {
    cudaDeviceProp properties;
    if (cudaGetDeviceProperties(&properties, device) == cudaSuccess) {
      context->add_gpu_names(properties.name);
    }
  }
}

}  // namespace mtb
