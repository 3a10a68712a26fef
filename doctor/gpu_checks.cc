#include "doctor/gpu_checks.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "doctor/check_table.h"

namespace mtb::doctor {
namespace {

constexpr char kGpu[] = "gpu";

DoctorCheck Version(const std::string& name, const std::string& version,
                    const std::string& fix) {
  if (version.empty() || absl::StartsWith(version, "unavailable")) {
    return MakeCheck(kGpu, name, "fail", version.empty() ? "(unknown)" : version, fix);
  }
  return MakeCheck(kGpu, name, "pass", version);
}

}  // namespace

std::vector<DoctorCheck> GpuChecks(const RunContext& cuda) {
  std::vector<DoctorCheck> checks;
  checks.push_back(Version("CUDA driver", cuda.cuda_driver_version(),
                           "install the NVIDIA driver (nvidia-smi must work)"));
  checks.push_back(Version("CUDA runtime", cuda.cuda_runtime_version(),
                           "the CUDA runtime library (libcudart) must load"));
  checks.push_back(Version("NCCL", cuda.nccl_version(),
                           "install NCCL (libnccl2) matching the CUDA runtime"));
  std::vector<std::string> devices(cuda.gpu_names().begin(), cuda.gpu_names().end());
  if (devices.empty()) {
    checks.push_back(MakeCheck(kGpu, "devices", "fail", "no visible GPU",
                               "check CUDA_VISIBLE_DEVICES and the driver"));
  } else {
    DoctorCheck check = MakeCheck(
        kGpu, "devices", "pass",
        absl::StrCat(devices.size(), " visible: ", absl::StrJoin(devices, ", ")));
    check.set_measured(static_cast<double>(devices.size()));
    check.set_unit("GPUs");
    checks.push_back(check);
  }
  return checks;
}

}  // namespace mtb::doctor
