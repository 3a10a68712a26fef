// The CUDA/NCCL side of provenance, for --config=cuda binaries that
// do not link LibTorch.
#ifndef MTB_COMMON_RESULTS_CUDA_INFO_H_
#define MTB_COMMON_RESULTS_CUDA_INFO_H_

#include "common/results/results.pb.h"

namespace mtb {

// Sets nccl_version, cuda_runtime_version, cuda_driver_version and gpu_names
// (every visible device). Versions read "unavailable (<reason>)" where the
// runtime cannot say, e.g. on a machine without a driver.
void FillCudaInfo(RunContext* context);

}  // namespace mtb

#endif  // MTB_COMMON_RESULTS_CUDA_INFO_H_
