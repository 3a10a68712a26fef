// row_linear: Megatron's RowParallelLinear, Y = X Wᵀ + b with the weight W
// (D, F) split by input columns: rank r holds columns [r·F/n, (r+1)·F/n) and
// the matching block of the input's last dimension (the input is already
// split, as after a column-parallel layer). Each rank's partial product goes
// through g (all-reduce forward, identity backward); the bias is added once,
// after the sum.
#ifndef MTB_TP_CHECK_ROW_LINEAR_H_
#define MTB_TP_CHECK_ROW_LINEAR_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/options.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

inline constexpr char kRowLinear[] = "row_linear";

// out, grad_input, grad_weight, grad_bias.
std::vector<TensorSpec> RowLinearTensors();

// F divisible by n.
absl::Status ValidateRowLinear(const CheckOptions& options, const World& world);

// Forward: one all-reduce of the (B, T, D) output. Backward: none.
std::vector<ExpectedCollective> RowLinearCollectives(
    const CheckOptions& options, int world_size);

// Collective: every rank of `comm` calls it.
absl::StatusOr<CheckResult> RunRowLinearCheck(const CheckOptions& options,
                                              collective::Communicator& comm,
                                              const CheckHooks& hooks);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_ROW_LINEAR_H_
