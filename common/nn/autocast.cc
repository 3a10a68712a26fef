#include "common/nn/autocast.h"

#include "ATen/autocast_mode.h"

namespace mtb {
namespace nn {
namespace {

void Apply(const AutocastState& state) {
  at::autocast::set_autocast_cpu_dtype(state.cpu_dtype);
  at::autocast::set_autocast_cache_enabled(state.cache_enabled);
  at::autocast::set_cpu_enabled(state.cpu_enabled);
}

}  // namespace

AutocastState CurrentAutocastState() {
  AutocastState state;
  state.cpu_enabled = at::autocast::is_cpu_enabled();
  state.cpu_dtype = at::autocast::get_autocast_cpu_dtype();
  state.cache_enabled = at::autocast::is_autocast_cache_enabled();
  return state;
}

AutocastGuard::AutocastGuard(bool enabled)
    : AutocastGuard(AutocastState{enabled, c10::kBFloat16, !enabled}) {}

AutocastGuard::AutocastGuard(const AutocastState& state)
    : previous_(CurrentAutocastState()) {
  Apply(state);
}

AutocastGuard::~AutocastGuard() {
  Apply(previous_);
  // The cache is off while we are enabled, but a caller may have used it.
  if (!previous_.cpu_enabled) at::autocast::clear_cache();
}

}  // namespace nn
}  // namespace mtb
