// Checkpoint pieces (trainer/run/strategy.h, "Checkpoint state") of flat ranges
// of the parameter store: a range of flat elements, which may span several
// parameters, becomes one piece per parameter it touches, each a view of live
// memory. Every strategy built on the store (single, ddp, zero1/2, fsdp)
// lists its state through these, so the names, global shapes and offsets are
// the same whoever holds them.
#ifndef MTB_TRAINER_MODEL_STATE_PIECES_H_
#define MTB_TRAINER_MODEL_STATE_PIECES_H_

#include <cstdint>
#include <vector>

#include "trainer/model/optimizer.h"
#include "trainer/model/parameter_store.h"
#include "trainer/run/strategy.h"

namespace mtb {

using FlatRange = FlatAdamW::Range;

// "model/<name>" pieces of the flat parameters over `ranges` (store offsets),
// in range order and layout order within a range.
std::vector<StatePiece> ModelPieces(const ParameterStore& store,
                                    const std::vector<FlatRange>& ranges);

// The same pieces of parameters kept outside the store's flat buffer
// (fsdp's shards): values[i] is (ranges[i].numel) fp32, the values of
// range i.
std::vector<StatePiece> ModelPiecesOf(const ParameterStore& store,
                                      const std::vector<FlatRange>& ranges,
                                      const std::vector<at::Tensor>& values);

// "optimizer/exp_avg/<name>" and "optimizer/exp_avg_sq/<name>" pieces of
// `optimizer`'s m and v over `ranges`; each range must lie inside one of the
// optimizer's ranges.
std::vector<StatePiece> OptimizerPieces(const ParameterStore& store,
                                        const FlatAdamW& optimizer,
                                        const std::vector<FlatRange>& ranges);

// "optimizer/step": the update count, a scalar (global shape {}).
StatePiece OptimizerStepPiece(FlatAdamW& optimizer);

// `numel` elements split among n ranks, the first numel % n one element
// longer (zero's shards of a bucket, fsdp's of a unit; ddp's checkpoint
// slices).
std::vector<int64_t> EvenCounts(int64_t numel, int n);
// Rank `rank`'s contiguous range of that split of [0, numel).
FlatRange EvenSlice(int64_t numel, int n, int rank);

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_STATE_PIECES_H_
