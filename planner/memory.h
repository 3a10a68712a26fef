// Memory per rank of a layout: the trainer's closed forms
// (trainer/memory/memory_estimate.h, the same function --estimate_memory prints),
// called for the layout's data-parallel strategy and world, then scaled to
// the rank's share of a tp x pp layout (docs/planner.md, "Memory").
#ifndef MTB_PLANNER_MEMORY_H_
#define MTB_PLANNER_MEMORY_H_

#include <cstdint>

#include "planner/planner.pb.h"
#include "trainer/train_result.pb.h"

namespace mtb::planner {

// The trainer configuration a data-parallel layout runs as: the model, batch
// = micro_batch, grad_accum = micro_batches, the strategy with its
// --grad_sync=auto resolution, bucket_cap_mb, activation checkpointing and
// fsdp's switches.
TrainConfig TrainerConfigFor(const ModelSpec& model, const Layout& layout);

// Parameters of one rank of a tp x pp layout: the root unit (embeddings,
// final LayerNorm) split by tp, and pp-th of the blocks split by tp.
int64_t RankParameters(const ModelSpec& model, const Layout& layout);

// tp = pp = 1: exactly EstimateRankMemoryFor(TrainerConfigFor(...), dp,
// strategy). Otherwise its terms scaled: parameters, gradients, optimizer
// state and collective temporaries by RankParameters / P; activations to
// the first stage's L/pp blocks with min(m, pp) micro-batches in flight
// (1F1B), divided by tp with sequence parallelism (without it the LayerNorm
// values, 4 of the block's 16 B T d, stay whole); logits by tp (a
// vocabulary-parallel head) on the last stage. `capacity` is the device's.
MemoryPrediction PredictMemory(const ModelSpec& model, const Layout& layout, int64_t capacity);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_MEMORY_H_
