// Mixed precision on the CPU: bf16 autocast with fp32 master weights.
#ifndef MTB_COMMON_NN_AUTOCAST_H_
#define MTB_COMMON_NN_AUTOCAST_H_

#include "c10/core/ScalarType.h"

namespace mtb {
namespace nn {

// The autocast state of the calling thread (autocast state is thread-local).
struct AutocastState {
  bool cpu_enabled = false;
  c10::ScalarType cpu_dtype = c10::kBFloat16;
  bool cache_enabled = true;
};

AutocastState CurrentAutocastState();

// Sets the calling thread's CPU autocast state while it lives and restores the
// previous one after. Enabled, it turns bf16 autocast on with the weight-cast
// cache *off*: LibTorch 1.13 caches the bf16 copy of a weight made under
// no_grad (activation checkpointing's forward) and would hand that copy, which
// has no autograd history, to later grad-mode uses, silently dropping their
// gradients. Casting the weights again per use costs little next to the
// matmuls. Not copyable; construct and destroy on the same thread.
class AutocastGuard {
 public:
  // enabled = false leaves autocast off (fp32).
  explicit AutocastGuard(bool enabled);
  explicit AutocastGuard(const AutocastState& state);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastState previous_;
};

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_AUTOCAST_H_
