// The whole run on one rank: every configuration of the sweep, benchmarked or
// (--check) checked against the reference, with a progress line per
// configuration on rank 0.
#ifndef MTB_MOE_COMM_RUN_H_
#define MTB_MOE_COMM_RUN_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "moe_comm/check.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {

// `after_first` runs once the first configuration is done (the caller
// tightens the collective timeout there); `at_phase` hears the
// configuration's index (from 1) and the layer's phase ("dispatch",
// "combine") at the start of each (where --fault acts). Collective: every
// rank calls it. The result has mode, options, configs or checks and pass;
// run_context is the caller's.
absl::StatusOr<MoeCommResult> RunMoeComm(
    const MoeCommOptions& options, collective::Communicator& comm,
    const MoeCheckHooks& hooks = {},
    const std::function<absl::Status()>& after_first = {},
    const std::function<void(int64_t, const char*)>& at_phase = {});

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_RUN_H_
