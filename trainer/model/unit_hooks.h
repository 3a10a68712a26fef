// Per-unit points in the model's forward: the model calls
// every UnitHooks in ForwardOptions::unit_hooks just before each unit's
// forward and just after it. A unit is the parameter store's
// (trainer/model/parameter_store.h): the root (embeddings, final LayerNorm, tied
// head) and one per transformer block.
//
// Who uses them: fsdp (trainer/strategy/fsdp.h) is a parameter provider — it
// all-gathers a unit before its forward, frees it after, and hangs a hook on
// the unit output's gradient, which fires before that unit's backward (and
// before an activation-checkpoint recompute), to gather it again. Anything
// else that wants per-unit points (per-block trace spans, say) implements the
// same interface and is added to the list; hooks run in list order at both
// points, and each AfterUnitForward receives what the previous one returned.
//
// Order of calls in one forward (U = number of units, unit 0 the root):
//   BeforeUnitForward(0)               (before the embeddings)
//   for each block unit u = 1 .. U-1:
//     BeforeUnitForward(u); x = BlockInput(u, x); x = block(x);
//     x = AfterUnitForward(u, x)
//   x = AfterUnitForward(0, logits)    (after the final LayerNorm and head)
// (each step over the whole list before the next.)
// With activation checkpointing a block's recompute in backward calls no
// hook: the block runs again inside the checkpoint's backward, after the
// gradient hook on its output has fired.
//
// Threading: called on the thread that runs the forward; exceptions thrown
// by a hook propagate out of the forward (the trainer turns them into the
// step's error), so a provider that could not supply parameters throws rather
// than letting the unit compute on freed memory.
#ifndef MTB_TRAINER_MODEL_UNIT_HOOKS_H_
#define MTB_TRAINER_MODEL_UNIT_HOOKS_H_

#include "ATen/core/Tensor.h"

namespace mtb {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // Before unit `unit`'s forward computation.
  virtual void BeforeUnitForward(int unit) = 0;
  // After it: `output` is the unit's output ((B, T, D) for a block, the
  // logits (B, T, V) for the root). Returns the tensor the model continues
  // with: `output` itself, or a tensor equal to it that carries a gradient
  // hook (at::Tensor::register_hook on `output` does that in place).
  virtual at::Tensor AfterUnitForward(int unit, const at::Tensor& output) = 0;
  // Between BeforeUnitForward(u) and the block's computation, for block
  // units only: `input` is what the block computes on. Returns the tensor the
  // block uses: `input`, or a tensor equal to it. A gradient hook on a new
  // alias of `input` (not on `input` itself, which is the previous unit's
  // output and carries that unit's hooks) fires when this block's backward
  // has produced its input's gradient, i.e. when the block's backward ends,
  // before the previous unit's hooks: the per-block trace spans
  // (trainer/run/block_spans.h) end there. Default: `input` (fsdp needs nothing
  // here).
  virtual at::Tensor BlockInput(int unit, const at::Tensor& input) {
    (void)unit;
    return input;
  }
};

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_UNIT_HOOKS_H_
