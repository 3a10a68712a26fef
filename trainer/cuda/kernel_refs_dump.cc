// kernel_refs_dump: writes the per-kernel reference folder (kernel_refs.h)
// that kernel_check compares the CUDA kernels with on a GPU machine.
//
//   bazel run //trainer/cuda:kernel_refs_dump -- $PWD/tools/gpu/refs
#include <filesystem>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "trainer/cuda/kernel_refs.h"
#include "trainer/cuda/kernel_refs_maker.h"

ABSL_FLAG(uint64_t, seed, 7, "seed of the inputs");

int main(int argc, char** argv) {
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::cerr << "usage: kernel_refs_dump [--seed=N] OUT_DIR\n";
    return 2;
  }
  const std::string dir = args[1];
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::cerr << "kernel_refs_dump: OUT_DIR " << dir << ": " << error.message() << "\n";
    return 2;
  }
  const mtb::cuda::KernelRefs refs =
      mtb::cuda::MakeKernelRefs(mtb::cuda::RefShape(), absl::GetFlag(FLAGS_seed));
  if (const std::string why = mtb::cuda::WriteKernelRefs(dir, refs); !why.empty()) {
    std::cerr << "kernel_refs_dump: " << why << "\n";
    return 1;
  }
  std::cout << "wrote " << refs.kernels.size() << " kernels' references to " << dir << "\n";
  return 0;
}
