// Which library runs the model's matrix products (common/gemm/ops.h).
//
//   onednn  oneDNN 2.6's dnnl_sgemm for fp32 (about twice OpenBLAS's FLOP/s on
//           this machine at the model's shapes, docs/gemm.md); bf16 stays on
//           LibTorch's own bf16 path, which is oneDNN's brgemm already.
//   blas    LibTorch's at::linear / at::matmul: OpenBLAS for fp32, exactly the
//           kernels and order PyTorch itself runs (the reference test's bit
//           equality rests on it).
//
// The choice is process-wide: every rank thread of a process and every
// autograd backward runs the products of the backend the forward saw (an op
// records its backend at forward time).
#ifndef MTB_COMMON_GEMM_BACKEND_H_
#define MTB_COMMON_GEMM_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {
namespace gemm {

enum class Backend { kOneDnn, kBlas };

// "auto" (oneDNN), "onednn" or "blas"; anything else is kInvalidArgument
// naming the value and the choices.
absl::StatusOr<Backend> ParseBackend(absl::string_view name);

// "onednn" or "blas".
const char* BackendName(Backend backend);

// The process-wide backend (initially oneDNN). Thread-safe; set it before the
// ranks start, not while a step runs.
Backend DefaultBackend();
void SetDefaultBackend(Backend backend);

// Sets the process-wide backend while it lives (tests).
class ScopedBackend {
 public:
  explicit ScopedBackend(Backend backend);
  ~ScopedBackend();
  ScopedBackend(const ScopedBackend&) = delete;
  ScopedBackend& operator=(const ScopedBackend&) = delete;

 private:
  Backend previous_;
};

}  // namespace gemm
}  // namespace mtb

#endif  // MTB_COMMON_GEMM_BACKEND_H_
