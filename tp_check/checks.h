// The checks tp_check runs, in order, and running a selection of them.
#ifndef MTB_TP_CHECK_CHECKS_H_
#define MTB_TP_CHECK_CHECKS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/options.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

inline constexpr int kSchemaVersion = 1;

struct CheckSpec {
  const char* name;
  std::vector<TensorSpec> (*tensors)();
  absl::Status (*validate)(const CheckOptions&, const World&);
  std::vector<ExpectedCollective> (*collectives)(const CheckOptions&, int);
  absl::StatusOr<CheckResult> (*run)(const CheckOptions&, collective::Communicator&,
                                     const CheckHooks&);
};

// column_linear, row_linear, mlp, attention, sequence_parallel,
// vocab_parallel_ce.
const std::vector<CheckSpec>& AllChecks();

// options.checks() (every check when empty), each known and named once:
// kInvalidArgument listing the known names otherwise.
absl::StatusOr<std::vector<const CheckSpec*>> SelectChecks(
    const CheckOptions& options);

// Everything that can be checked before any communication: the selection,
// the sizes each selected check splits over `world`, and the test hook (a
// rank of the world, a tensor of a selected check).
absl::Status ValidateOptions(const CheckOptions& options, const World& world,
                             const CheckHooks& hooks);

// Runs the selected checks in order on every rank (collective). The result
// has options, checks and pass set; the caller adds the RunContext. A check
// that fails its comparison is a failed CheckResult, not an error; errors are
// bad options and communication failures. `after_first_check`, when set,
// runs once after the first check (e.g. to tighten the collective timeout).
absl::StatusOr<TpCheckResult> RunChecks(
    const CheckOptions& options, collective::Communicator& comm,
    const CheckHooks& hooks,
    const std::function<absl::Status()>& after_first_check = nullptr);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_CHECKS_H_
