// Tensor parallelism's flags and rules (docs/tp.md), torch-free: --tp and
// --sequence_parallel are checked with the rest of the configuration,
// before any rank starts.
#ifndef MTB_TRAINER_TP_OPTIONS_H_
#define MTB_TRAINER_TP_OPTIONS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/train_result.pb.h"

namespace mtb::tp {

// Ranks per tensor-parallel group (TrainConfig.tp, where 0 is unset: 1).
int TensorParallelSize(const TrainConfig& config);

// The rules that need no world size: --tp >= 1 divides the heads, the
// vocabulary and the MLP width (4 x --d_model); --sequence_parallel needs
// --tp > 1 and a --seq_len it divides; --tp > 1 refuses --reduction=exact
// (docs/tp.md says why). kInvalidArgument, one line naming the flag.
absl::Status ValidateTensorParallel(const TrainConfig& config);

// --tp divides the world size (world = dp x tp).
absl::Status ValidateTensorParallelWorld(const TrainConfig& config,
                                         int world_size);

// Tests only (--testonly_tp_fault): a broken tensor-parallel piece, to show
// that //trainer:tp_process_test catches it.
enum class TestFault {
  kNone,
  // The MLP's row-parallel output is not summed over the group (each rank
  // goes on with its partial sum).
  kRowParallelUnreduced,
  // With --sequence_parallel, the LayerNorm weights' and biases' gradients
  // (partial: each rank saw its part of the sequence) are not summed over
  // the group.
  kLayerNormUnsynced,
  // The gradient norm counts the replicated parameters on every rank of
  // the group.
  kNormDoubleCounted,
  // Without --sequence_parallel, the dropouts on replicated tensors (the
  // residual branches after g) draw a stream per tp rank (the seed offset by
  // the rank) instead of the group's one: the replicas drift apart.
  kReplicatedDropoutPerRank,
  // The dropouts on sharded tensors (the attention probabilities of this
  // rank's heads; with SP the residual branches on this rank's positions)
  // draw the same stream on every tp rank (the first part's mask) instead
  // of this rank's part.
  kShardedDropoutShared,
};
// "", "row_parallel_unreduced", "layernorm_unsynced", "norm_double_counted",
// "replicated_dropout_per_rank", "sharded_dropout_shared".
absl::StatusOr<TestFault> ParseTestFault(absl::string_view text);

}  // namespace mtb::tp

#endif  // MTB_TRAINER_TP_OPTIONS_H_
