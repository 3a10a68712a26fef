// doctor_gpu's checks, from the CUDA/NCCL facts FillCudaInfo records
// (common/results/cuda_info.h): a parameter, so tests need no GPU.
#ifndef MTB_DOCTOR_GPU_CHECKS_H_
#define MTB_DOCTOR_GPU_CHECKS_H_

#include <vector>

#include "common/results/results.pb.h"
#include "doctor/doctor.pb.h"

namespace mtb::doctor {

// CUDA driver, CUDA runtime, NCCL version and visible devices: a missing
// driver, runtime or NCCL, or no visible device, fails with the fix.
std::vector<DoctorCheck> GpuChecks(const RunContext& cuda);

}  // namespace mtb::doctor

#endif  // MTB_DOCTOR_GPU_CHECKS_H_
