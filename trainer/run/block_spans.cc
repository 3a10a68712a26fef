#include "trainer/run/block_spans.h"

#include <utility>

#include "ATen/Functions.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace mtb {

// Shared with the gradient hooks, weakly: a hook whose BlockSpans is gone
// does nothing. Hooks run one at a time on the thread that calls backward
// (CPU autograd runs there), after the forward's writes: no lock is needed.
struct BlockSpans::State {
  trace::TraceRecorder* recorder;
  std::vector<std::string> unit_names;
  int micro_batch;
  std::vector<absl::Time> forward_begin, backward_begin;
  std::vector<bool> backward_open;

  void Add(const char* phase, int unit, absl::Time begin, absl::Time end) const {
    recorder->AddSpan(SpanName(phase, unit_names[unit]), "compute", trace::kComputeTrack,
                      begin, end,
                      {{"parent", phase},
                       {"block", absl::StrCat(unit - 1)},
                       {"micro_batch", absl::StrCat(micro_batch)}});
  }
};

BlockSpans::BlockSpans(trace::TraceRecorder* recorder, std::vector<std::string> unit_names,
                       UnitHooks* inner, int micro_batch)
    : state_(std::make_shared<State>()), inner_(inner) {
  CHECK(recorder != nullptr);
  const size_t units = unit_names.size();
  state_->recorder = recorder;
  state_->unit_names = std::move(unit_names);
  state_->micro_batch = micro_batch;
  state_->forward_begin.resize(units);
  state_->backward_begin.resize(units);
  state_->backward_open.resize(units, false);
}

std::string BlockSpans::SpanName(const char* phase, const std::string& unit_name) {
  return absl::StrCat(phase, " ", unit_name);
}

void BlockSpans::BeforeUnitForward(int unit) {
  if (inner_ != nullptr) inner_->BeforeUnitForward(unit);
  CHECK_LT(static_cast<size_t>(unit), state_->unit_names.size());
  state_->forward_begin[unit] = absl::Now();
}

at::Tensor BlockSpans::BlockInput(int unit, const at::Tensor& input) {
  at::Tensor x = input;
  if (input.requires_grad()) {
    // A new node of its own (the identity's backward), so this hook runs when
    // the block's backward is done and before the previous unit's hooks on
    // `input`.
    x = at::alias(input);
    std::weak_ptr<State> weak = state_;
    x.register_hook([weak, unit](const at::Tensor&) {
      const std::shared_ptr<State> state = weak.lock();
      if (state == nullptr || !state->backward_open[unit]) return;
      state->backward_open[unit] = false;
      state->Add("backward", unit, state->backward_begin[unit], absl::Now());
    });
  }
  return inner_ != nullptr ? inner_->BlockInput(unit, x) : x;
}

at::Tensor BlockSpans::AfterUnitForward(int unit, const at::Tensor& output) {
  if (unit != 0) state_->Add("forward", unit, state_->forward_begin[unit], absl::Now());
  at::Tensor out = inner_ != nullptr ? inner_->AfterUnitForward(unit, output) : output;
  if (unit != 0 && out.requires_grad()) {
    // After the strategy's hook (registered above): the block's backward
    // starts once fsdp has its parameters back.
    std::weak_ptr<State> weak = state_;
    out.register_hook([weak, unit](const at::Tensor&) {
      const std::shared_ptr<State> state = weak.lock();
      if (state == nullptr) return;
      state->backward_begin[unit] = absl::Now();
      state->backward_open[unit] = true;
    });
  }
  return out;
}

}  // namespace mtb
