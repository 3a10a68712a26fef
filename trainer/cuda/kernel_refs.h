// Per-kernel reference files: for each kernel the CUDA trainer has, its inputs,
// the outputs the CPU trainer's LibTorch ops compute from them (in fp64), and a
// bound on how far an fp32 (or bf16) implementation may be from each output.
// kernel_refs_dump writes them here; kernel_check reads them on a GPU machine,
// runs each kernel and compares (docs/gpu.md, "Per-kernel checks").
//
// The format (version 1), a folder:
//   manifest.txt   text, one record per line, fields separated by one space:
//     mtb-kernel-refs 1                      first line
//     seed S                                 the inputs' seed
//     kernel NAME                            starts a kernel
//     input NAME DTYPE FILE RANK DIM...      an input tensor
//     output NAME DTYPE FILE RANK DIM...     an expected output
//     bound NAME FP32 BF16                   max |observed - expected| allowed
//                                            for output NAME (both > 0)
//     end                                    ends the kernel
//   FILE           raw little-endian values, row-major, DTYPE f32 (IEEE
//                  binary32), f64 (binary64) or i32; exactly prod(DIM) values.
// Names are [a-z0-9_]+; FILE is a plain name inside the folder.
//
// Plain C++ with std:: types only: the CUDA sources include this header.
#ifndef MTB_TRAINER_CUDA_KERNEL_REFS_H_
#define MTB_TRAINER_CUDA_KERNEL_REFS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mtb {
namespace cuda {

enum class RefDtype { kF32, kF64, kI32 };

struct RefTensor {
  std::string name;
  RefDtype dtype = RefDtype::kF32;
  std::vector<int64_t> shape;
  // Every dtype held as double (f32 and i32 values are exact in it).
  std::vector<double> values;
  int64_t numel() const;
};

struct KernelRef {
  std::string name;
  std::vector<RefTensor> inputs;
  std::vector<RefTensor> outputs;
  // Per output name.
  std::map<std::string, double> bound_fp32;
  std::map<std::string, double> bound_bf16;
  const RefTensor* Input(const std::string& name) const;  // null if absent
};

struct KernelRefs {
  uint64_t seed = 0;
  std::vector<KernelRef> kernels;
};

// "" on success, otherwise one line saying what failed (naming the file).
std::string WriteKernelRefs(const std::string& dir, const KernelRefs& refs);
std::string ReadKernelRefs(const std::string& dir, KernelRefs* refs);

// Runs one kernel on its inputs: fills (*outputs)[name] for each expected
// output (values in the output's row-major order). "" or why it could not run.
using KernelRunner = std::function<std::string(
    const KernelRef& kernel, std::map<std::string, std::vector<double>>* outputs)>;

struct CheckLine {
  std::string kernel;
  std::string output;
  bool pass = false;
  double max_error = 0;  // max |observed - expected| (inf if non-finite)
  int64_t worst_index = -1;
  double bound = 0;
  std::string detail;  // why it failed when not a bound excess
};

enum class CheckPrecision { kFp32, kBf16 };

// Runs every kernel (or only those named in `only`, when not empty) and
// compares each output with its bound for `precision`. One line per output;
// a kernel that fails to run, or an output missing or of the wrong size, is
// one failing line.
std::vector<CheckLine> CheckKernels(const KernelRefs& refs, const KernelRunner& run,
                                    CheckPrecision precision,
                                    const std::vector<std::string>& only = {});

// "PASS kernel/output max_err=... bound=... at=..." or "FAIL ...".
std::string FormatCheckLine(const CheckLine& line);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_KERNEL_REFS_H_
