#include "common/libtorch/torch_info.h"

#include <dlfcn.h>

#include <fstream>
#include <string>

#include "ATen/Parallel.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/config.h"
#include "torch/version.h"

namespace mtb {
namespace {

// Finds the first mapped file whose path contains `needle`.
std::string FindMappedLibrary(absl::string_view needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (absl::StrContains(path, needle)) return path;
  }
  return "";
}

}  // namespace

std::string DescribeBlasLibrary() {
  // Debian picks libblas.so.3 through alternatives; /proc/self/maps shows the
  // file that was actually resolved.
  std::string path = FindMappedLibrary("libblas.so");
  if (path.empty()) path = FindMappedLibrary("openblas");
  if (path.empty()) path = FindMappedLibrary("libmkl");
  using ConfigFn = char* (*)();
  auto openblas_config =
      reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  std::string description;
  if (openblas_config != nullptr) {
    // Already starts with "OpenBLAS <version>".
    description = openblas_config();
  } else if (absl::StrContains(path, "openblas")) {
    description = "OpenBLAS";
  } else if (absl::StrContains(path, "mkl")) {
    description = "MKL";
  } else if (!path.empty()) {
    description = "reference BLAS (slow: install libopenblas0-openmp)";
  } else {
    description = "none mapped";
  }
  return path.empty() ? description : absl::StrCat(description, " (", path, ")");
}

void FillTorchInfo(RunContext* context) {
  context->set_libtorch_version(TORCH_VERSION);
  context->set_gloo_version(absl::StrCat(GLOO_VERSION_MAJOR, ".",
                                         GLOO_VERSION_MINOR, ".",
                                         GLOO_VERSION_PATCH));
  context->set_blas_library(DescribeBlasLibrary());
  context->set_intra_op_threads(at::get_num_threads());
  context->set_inter_op_threads(at::get_num_interop_threads());
}

}  // namespace mtb
