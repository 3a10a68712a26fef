// mlp: the transformer MLP (common/nn Mlp: D -> F -> D with GELU) as Megatron
// splits it: the first linear column-parallel (rows [r·F/n, (r+1)·F/n) of
// fc_weight and fc_bias), GELU on the shard, the second row-parallel (the
// matching columns of proj_weight), then proj_bias once. Exactly one
// all-reduce each way: g's forward after the row layer, f's backward before
// the column layer (Megatron's conjugate pair).
#ifndef MTB_TP_CHECK_MLP_H_
#define MTB_TP_CHECK_MLP_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/options.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

inline constexpr char kMlp[] = "mlp";

// out, grad_input, grad_fc_weight, grad_fc_bias, grad_proj_weight,
// grad_proj_bias.
std::vector<TensorSpec> MlpTensors();

// F divisible by n.
absl::Status ValidateMlp(const CheckOptions& options, const World& world);

// Forward: one all-reduce of the (B, T, D) output. Backward: one all-reduce
// of the (B, T, D) input gradient.
std::vector<ExpectedCollective> MlpCollectives(const CheckOptions& options,
                                               int world_size);

// Collective: every rank of `comm` calls it.
absl::StatusOr<CheckResult> RunMlpCheck(const CheckOptions& options,
                                        collective::Communicator& comm,
                                        const CheckHooks& hooks);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_MLP_H_
