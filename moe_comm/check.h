// --check: the expert-parallel layer (moe_comm/layer.h) against the
// single-process reference (nn::ReferenceMoe on the concatenated batch,
// capacity per rank slice), forward and backward, on one configuration.
//
// Loss on each rank: sum(out * upstream) + aux_w * aux + z_w * z; the
// reference's is the same on the whole batch. Compared (common/equivalence):
// out (this rank's rows), aux_loss, z_loss, grad_input (this rank's rows),
// grad_router_weight (all-reduced over ranks after backward), and this rank's
// block of grad_fc_weight, grad_fc_bias, grad_proj_weight, grad_proj_bias.
// Collectives against the closed form from the reference's routing: forward
// one all_reduce of the (2E + 3) routing sums, one all_to_all of the E
// counts, two all_to_allv (dispatch and combine: each way, the rows this rank
// sends to other ranks plus those it receives, times 4D bytes); backward the
// two reverse all_to_allv and one all_reduce of the (E, D) router gradient.
#ifndef MTB_MOE_COMM_CHECK_H_
#define MTB_MOE_COMM_CHECK_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "common/equivalence/equivalence.h"
#include "moe_comm/layer.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {

struct MoeCheckHooks {
  equivalence::CheckHooks perturb;  // perturbs a named tensor (tests)
  PackingOrder packing = PackingOrder::kDestinationThenExpert;
};

std::vector<equivalence::TensorSpec> MoeCheckTensors();

// Collective: every rank calls it with the same arguments. `options` gives
// seed, tolerances and loss weights.
absl::StatusOr<ConfigCheck> RunMoeCheck(const MoeConfig& config,
                                        const MoeCommOptions& options,
                                        collective::Communicator& comm,
                                        const MoeCheckHooks& hooks = {},
                                        const PhaseHook& before_phase = {});

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_CHECK_H_
