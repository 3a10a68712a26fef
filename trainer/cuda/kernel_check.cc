// kernel_check: runs every kernel of a per-kernel reference folder
// (kernel_refs.h, written here by kernel_refs_dump) on the GPU and prints, per
// output, the observed max |GPU - fp64 reference| against the bound derived
// for fp32, or with --precision=bf16 the bf16 step's kernels against the bf16
// bound (docs/gpu.md, "Per-kernel checks").
//
//   kernel_check [--precision=fp32|bf16] [--plant_off_by_one] [--kernels=a,b] REFS_DIR
//
// Exit 0 when every output is within its bound, 1 when one is not, 2 on bad
// usage, an unreadable folder or no usable GPU. --plant_off_by_one lets the
// causal softmax see one future key: the check script's negative case, which
// must fail.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "trainer/cuda/gpt_cuda.h"
#include "trainer/cuda/kernel_refs.h"

ABSL_FLAG(bool, plant_off_by_one, false,
          "the negative case: the causal softmax sees one future key");
ABSL_FLAG(std::string, kernels, "", "comma-separated kernels to run (default: all)");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32: the fp32 step's kernels against the fp32 bounds; bf16: the bf16 "
          "step's kernels (bf16 activations) against the bf16 bounds");

int main(int argc, char** argv) {
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::cerr << "usage: kernel_check [--precision=fp32|bf16] [--plant_off_by_one] "
                 "[--kernels=a,b] REFS_DIR\n";
    return 2;
  }
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "fp32" && precision != "bf16") {
    std::cerr << "kernel_check: --precision=" << precision << " must be fp32 or bf16\n";
    return 2;
  }
  const bool bf16 = precision == "bf16";
  mtb::cuda::KernelRefs refs;
  if (const std::string why = mtb::cuda::ReadKernelRefs(args[1], &refs); !why.empty()) {
    std::cerr << "kernel_check: REFS_DIR: " << why << "\n";
    return 2;
  }
  std::vector<std::string> only;
  if (!absl::GetFlag(FLAGS_kernels).empty()) {
    only = absl::StrSplit(absl::GetFlag(FLAGS_kernels), ',');
    for (const std::string& name : only) {
      bool known = false;
      for (const mtb::cuda::KernelRef& k : refs.kernels) known |= k.name == name;
      if (!known) {
        std::cerr << "kernel_check: --kernels: no kernel " << name << " in " << args[1] << "\n";
        return 2;
      }
    }
  }
  mtb::cuda::DeviceInfo device;
  if (const std::string why = mtb::cuda::ProbeDevice(&device); !why.empty()) {
    std::cerr << "kernel_check: no usable GPU: " << why << "\n";
    return 2;
  }
  const bool planted = absl::GetFlag(FLAGS_plant_off_by_one);
  std::cout << "# " << device.name << ", driver " << device.driver_version << ", runtime "
            << device.runtime_version << "; references seed " << refs.seed
            << "; precision " << precision << (planted ? "; PLANTED off-by-one" : "") << "\n";
  const std::vector<mtb::cuda::CheckLine> lines = mtb::cuda::CheckKernels(
      refs,
      [planted, bf16](const mtb::cuda::KernelRef& kernel,
                      std::map<std::string, std::vector<double>>* outputs) {
        return mtb::cuda::RunReferenceKernel(kernel, planted, outputs, bf16);
      },
      bf16 ? mtb::cuda::CheckPrecision::kBf16 : mtb::cuda::CheckPrecision::kFp32, only);
  int failed = 0;
  for (const mtb::cuda::CheckLine& line : lines) {
    std::cout << mtb::cuda::FormatCheckLine(line) << "\n";
    failed += !line.pass;
  }
  std::cout << "# " << failed << " of " << lines.size() << " outputs outside their bound\n";
  return failed == 0 ? 0 : 1;
}
