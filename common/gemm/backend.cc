#include "common/gemm/backend.h"

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mtb {
namespace gemm {
namespace {

std::atomic<Backend>& Current() {
  static std::atomic<Backend> current{Backend::kOneDnn};
  return current;
}

}  // namespace

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  if (name == "auto" || name == "onednn") return Backend::kOneDnn;
  if (name == "blas") return Backend::kBlas;
  return absl::InvalidArgumentError(
      absl::StrCat("--gemm=", name, " is not a GEMM backend: use auto, onednn or blas"));
}

const char* BackendName(Backend backend) { return backend == Backend::kOneDnn ? "onednn" : "blas"; }

Backend DefaultBackend() { return Current().load(); }

void SetDefaultBackend(Backend backend) { Current().store(backend); }

ScopedBackend::ScopedBackend(Backend backend) : previous_(DefaultBackend()) {
  SetDefaultBackend(backend);
}

ScopedBackend::~ScopedBackend() { SetDefaultBackend(previous_); }

}  // namespace gemm
}  // namespace mtb
