// attention: causal self-attention (common/nn CausalSelfAttention, fused QKV)
// with its heads split across ranks: rank r holds heads [r·H/n, (r+1)·H/n),
// that is its block of the query, key and value rows of the QKV projection
// (column-parallel) and the matching columns of the output projection
// (row-parallel, bias added once after the sum). One all-reduce each way, as
// in the MLP: g after the output projection, f before the QKV projection.
#ifndef MTB_TP_CHECK_ATTENTION_H_
#define MTB_TP_CHECK_ATTENTION_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/options.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

inline constexpr char kAttention[] = "attention";

// out, grad_input, grad_qkv_weight, grad_qkv_bias, grad_proj_weight,
// grad_proj_bias.
std::vector<TensorSpec> AttentionTensors();

// D divisible by the heads, the heads by n.
absl::Status ValidateAttention(const CheckOptions& options, const World& world);

// Forward: one all-reduce of the (B, T, D) output. Backward: one all-reduce
// of the (B, T, D) input gradient.
std::vector<ExpectedCollective> AttentionCollectives(
    const CheckOptions& options, int world_size);

// Collective: every rank of `comm` calls it.
absl::StatusOr<CheckResult> RunAttentionCheck(const CheckOptions& options,
                                              collective::Communicator& comm,
                                              const CheckHooks& hooks);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_ATTENTION_H_
