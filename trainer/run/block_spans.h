// Per-block forward and backward spans in a rank's trace ("forward
// and backward (per block)"). A BlockSpans is the UnitHooks the trainer puts
// in the model's forward of a traced micro-batch, wrapping the strategy's own
// (fsdp's gathers; nullptr for the others), so every strategy gets the same
// spans:
//
//   forward h.L   from after the strategy's BeforeUnitForward (fsdp: the
//                 unit gathered) to before its AfterUnitForward (fsdp: the
//                 unit freed);
//   backward h.L  from the block output's gradient hook, after the
//                 strategy's (fsdp: the unit regathered), to the hook on an
//                 alias of the block's input, which fires when the block's
//                 backward (with activation checkpointing: its recompute too)
//                 has produced that input's gradient, before the previous
//                 unit's hooks.
//
// Both are on the compute track with cat "compute" and args parent
// ("forward" / "backward": they nest inside the step's phase spans, which
// profiler_agg counts once), block (the layer index) and micro_batch. The
// root unit (embeddings, final LayerNorm, head) has no span of its own: it is
// the rest of its phase. Tracing off: the trainer makes no BlockSpans (one
// pointer test per micro-batch), and the model graph is the untraced one.
//
// Lifetime: must outlive the backward of the forward it was given to (the
// gradient hooks share its state and write to the recorder).
#ifndef MTB_TRAINER_RUN_BLOCK_SPANS_H_
#define MTB_TRAINER_RUN_BLOCK_SPANS_H_

#include <memory>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "common/trace/recorder.h"
#include "trainer/model/unit_hooks.h"

namespace mtb {

class BlockSpans final : public UnitHooks {
 public:
  // `unit_names`: the parameter store's (index = unit; unit 0 the root).
  // `inner`: the strategy's hooks (nullptr: none); called at every point.
  // `recorder` must outlive this object.
  BlockSpans(trace::TraceRecorder* recorder, std::vector<std::string> unit_names,
             UnitHooks* inner, int micro_batch);

  void BeforeUnitForward(int unit) override;
  at::Tensor BlockInput(int unit, const at::Tensor& input) override;
  at::Tensor AfterUnitForward(int unit, const at::Tensor& output) override;

  // The span names: "forward h.0", "backward h.0", ...
  static std::string SpanName(const char* phase, const std::string& unit_name);

 private:
  struct State;
  std::shared_ptr<State> state_;
  UnitHooks* inner_;
};

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_BLOCK_SPANS_H_
