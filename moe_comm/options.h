// moe_comm's options: the flags as one MoeCommOptions, their validation
// (before any rank starts: one line naming the flag, exit 2) and the sweep.
#ifndef MTB_MOE_COMM_OPTIONS_H_
#define MTB_MOE_COMM_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/skew.h"
#include "common/faults/fault_spec.h"
#include "common/launch/timeouts.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {

// N 1024, D 128, F 4D, E 2 x world size, top-2, capacity factor 1.25, skews
// uniform, zipf:0.5, zipf:1, zipf:1.5, zipf:2; 20 timed iterations after 5
// warm-ups; seed 1234; rtol = atol = 1e-4 (the router gradient sums n·N
// tokens' fp32 contributions in another order than the reference: 7.4e-5 at
// N 1024 on 4 ranks, docs/moe_comm.md "Tolerances"); aux weight 0.01, z
// weight 0.001.
MoeCommOptions DefaultOptions();

// Comma-separated values of a list flag ("256,1024"): kInvalidArgument
// naming --<flag> and the bad value.
absl::StatusOr<std::vector<int>> ParseIntList(const std::string& flag,
                                              const std::string& text);
absl::StatusOr<std::vector<double>> ParseDoubleList(const std::string& flag,
                                                    const std::string& text);

// Every rule, for `world_size` ranks set as `world_label` ("--nproc=4"):
// sizes >= 1; --num_experts (after 0 -> 2 x world size) divisible by the
// world size; --top_k 1 or 2 and <= --num_experts; --capacity_factor > 0;
// every --skew "uniform" or "zipf:S" (linear is comm_bench's, not a router
// skew); --iters >= 1, --warmup_iters >= 0; tolerances >= 0.
absl::Status ValidateOptions(const MoeCommOptions& options, int world_size,
                             const std::string& world_label);

// The Cartesian product of the list options, in flag order (tokens slowest,
// skew fastest), with num_experts 0 resolved for `world_size`.
std::vector<MoeConfig> ExpandSweep(const MoeCommOptions& options,
                                   int world_size);

// --fault= for this sweep at `world_size` ranks (common/faults): step is the
// configuration's index in ExpandSweep's order (from 1), phase "dispatch" or
// "combine". kInvalidArgument naming the bad part, a rank outside the world
// or a configuration past the last; a slow fault at or above the timeout it
// runs under (--first_step_timeout on the first configuration only, else
// --collective_timeout: ValidateSlowFaults, as the trainer checks its own)
// or that fires on no configuration.
absl::StatusOr<std::vector<Fault>> ResolveFaults(const std::string& spec,
                                                 const MoeCommOptions& options,
                                                 int world_size,
                                                 const TimeoutOptions& timeouts);

// "N=1024 D=256 E=4 k=2 cf=1.25 skew=zipf:1.2".
std::string DescribeConfig(const MoeConfig& config);

// The parsed skew of a validated config.
Skew SkewOf(const MoeConfig& config);

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_OPTIONS_H_
