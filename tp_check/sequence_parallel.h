// sequence_parallel: the MLP half of a pre-norm block, out = x +
// dropout(Mlp(LayerNorm(x))), with Megatron's sequence parallelism
// (Korthikanti et al. 2022): LayerNorm, dropout and the residual run on
// sequence shards (rank r holds positions [r·T/n, (r+1)·T/n) of every
// sample); the MLP runs tensor-parallel between an all-gather along the
// sequence (backward: reduce-scatter) and a reduce-scatter along the sequence
// (backward: all-gather), which replace the MLP's f and g. Each rank's
// gradients of the replicated parameters used on its shard only (LayerNorm
// weight and bias, the row layer's bias) are partial and summed by one
// coalesced all-reduce after backward. Dropout keeps element (b, t, d) iff the
// reference does: the shard applies its slice of the sample's mask
// (common/nn/dropout.h DropoutKeepMask, keyed by the global position), step 1,
// layer 0, site kMlpOutput.
#ifndef MTB_TP_CHECK_SEQUENCE_PARALLEL_H_
#define MTB_TP_CHECK_SEQUENCE_PARALLEL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/options.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

inline constexpr char kSequenceParallel[] = "sequence_parallel";

// out, grad_input, grad_ln_weight, grad_ln_bias, grad_fc_weight,
// grad_fc_bias, grad_proj_weight, grad_proj_bias.
std::vector<TensorSpec> SequenceParallelTensors();

// T and F divisible by n.
absl::Status ValidateSequenceParallel(const CheckOptions& options,
                                      const World& world);

// Forward: one all-gather and one reduce-scatter, each of the (B, T, D)
// activations. Backward: the same pair again, plus one all-reduce of the 3D
// partial parameter gradients.
std::vector<ExpectedCollective> SequenceParallelCollectives(
    const CheckOptions& options, int world_size);

// Collective: every rank of `comm` calls it.
absl::StatusOr<CheckResult> RunSequenceParallelCheck(
    const CheckOptions& options, collective::Communicator& comm,
    const CheckHooks& hooks);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_SEQUENCE_PARALLEL_H_
