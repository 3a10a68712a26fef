// Scalar collectives over a communicator (the step's scalar gather,
// trainer/run/step_scalars.h, and the step time's maximum), and the byte
// exchange checkpoints use, in one home. `communicator` may be nullptr or of world size
// 1: then nothing is communicated. Collective otherwise: every rank calls in
// the same order.
#ifndef MTB_TRAINER_STRATEGY_SCALARS_H_
#define MTB_TRAINER_STRATEGY_SCALARS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "trainer/run/strategy.h"

namespace mtb {

enum class ScalarReduction { kSum, kMean, kMax };

// One fp64 value reduced over ranks; `who` prefixes errors ("zero2").
absl::StatusOr<double> ReduceScalarOverRanks(
    collective::Communicator* communicator, double value, ScalarReduction op,
    const std::string& who);

// Every rank's `values`, rank by rank (Strategy::GatherScalars), bit-exact.
absl::StatusOr<std::vector<double>> GatherScalarsOverRanks(
    collective::Communicator* communicator, const std::vector<double>& values,
    const std::string& who);

// Every rank's `bytes` (any length, may differ by rank), rank by rank: small
// metadata such as a checkpoint's per-rank file reports.
absl::StatusOr<std::vector<std::string>> AllGatherBytesOverRanks(
    collective::Communicator* communicator, const std::string& bytes,
    const std::string& who);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_SCALARS_H_
