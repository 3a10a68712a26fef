// Test helpers for tp_check's checks: run a check on N rank threads and read
// its result.
#ifndef MTB_TP_CHECK_TEST_UTIL_H_
#define MTB_TP_CHECK_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

using CheckFn = std::function<absl::StatusOr<CheckResult>(
    const CheckOptions&, collective::Communicator&, const CheckHooks&)>;

// Runs `check` on `world_size` rank threads (common/collective/test_util.h, one
// intra-op thread) and returns each rank's result, rank 0 first. A failure to
// start the ranks is an error.
absl::StatusOr<std::vector<absl::StatusOr<CheckResult>>> RunOnThreads(
    const CheckFn& check, int world_size, const CheckOptions& options,
    const CheckHooks& hooks = {});

// The tensor row named `name`, or nullptr.
const TensorCheck* FindTensor(const CheckResult& result,
                              const std::string& name);

// One line per failed tensor or collective, for assertion messages.
std::string DescribeFailures(const CheckResult& result);

// gtest expectations shared by every check's test, each running `check` on
// `world_size` rank threads:
// every rank returns OK with pass = true, world_size set, `tensors` rows.
void ExpectPassesOnEveryRank(const CheckFn& check, int world_size,
                             const CheckOptions& options, int tensors);
// Perturbing `tensor` on the last rank fails the check on every rank, with
// that tensor (and only it) not ok, and the collectives still as expected.
void ExpectPerturbationIsNamed(const CheckFn& check, int world_size,
                               const CheckOptions& options,
                               const std::string& tensor);
// Rank 0's collective rows equal `expected` exactly: (phase, op, count,
// bytes sent = bytes received = bytes), in order.
struct CollectiveRow {
  std::string phase;
  std::string op;
  int count;
  int64_t bytes;
};
void ExpectCollectives(const CheckFn& check, int world_size,
                       const CheckOptions& options,
                       const std::vector<CollectiveRow>& expected);

// DefaultCheckOptions() with every size a check splits rounded up to a
// multiple of `n` (seq_len, ffn_hidden, heads, vocab; then hidden up to a
// multiple of heads), so every check runs at its default shape on n ranks:
// unchanged for n = 1, 2, 4; for n = 3: T 9, F 129, 6 heads, D 36, V 66
// (odd widths on purpose: nothing divides by 2 by accident).
CheckOptions DefaultOptionsFor(int n);

// Options with every size 1 except those a check splits, which are `n`
// (seq_len, ffn_hidden, heads = hidden, vocab): the smallest legal sizes of
// every check on n ranks.
CheckOptions SmallestOptions(int n);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_TEST_UTIL_H_
