// column_linear: Megatron's ColumnParallelLinear, Y = X Wᵀ + b with the
// weight W (F, D) and bias split by output rows: rank r holds rows
// [r·F/n, (r+1)·F/n). The input enters through f (identity forward,
// all-reduce of its gradient backward); the output is all-gathered along the
// last dimension, or left sharded with --gather_output=false.
#ifndef MTB_TP_CHECK_COLUMN_LINEAR_H_
#define MTB_TP_CHECK_COLUMN_LINEAR_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/options.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

inline constexpr char kColumnLinear[] = "column_linear";

// out, grad_input, grad_weight, grad_bias.
std::vector<TensorSpec> ColumnLinearTensors();

// F divisible by n.
absl::Status ValidateColumnLinear(const CheckOptions& options,
                                  const World& world);

// Forward: one all-gather of the (B, T, F) output (none when not gathered).
// Backward: one all-reduce of the (B, T, D) input gradient.
std::vector<ExpectedCollective> ColumnLinearCollectives(
    const CheckOptions& options, int world_size);

// Collective: every rank of `comm` calls it.
absl::StatusOr<CheckResult> RunColumnLinearCheck(const CheckOptions& options,
                                                 collective::Communicator& comm,
                                                 const CheckHooks& hooks);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_COLUMN_LINEAR_H_
