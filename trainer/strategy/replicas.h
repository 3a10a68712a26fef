// Setup steps every replicating strategy shares (ddp, zero1, zero2): check
// that every rank built the same model, then make every rank's parameters
// rank 0's. Collective: every rank calls them in the same order.
#ifndef MTB_TRAINER_STRATEGY_REPLICAS_H_
#define MTB_TRAINER_STRATEGY_REPLICAS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/collective/communicator.h"
#include "trainer/model/parameter_store.h"
#include "trainer/strategy/bucket_engine.h"

namespace mtb {

// kFailedPrecondition, naming the first rank that differs, when the ranks'
// parameter lists (count, elements, names and shapes) disagree.
absl::Status CheckSameParametersOnEveryRank(
    collective::Communicator& communicator, const ParameterStore& store,
    const std::string& who);

// Broadcasts rank 0's flat parameters, one bucket-sized slice at a time (in
// place: the parameters are views of the flat buffer).
absl::Status BroadcastParametersFromRankZero(
    collective::Communicator& communicator, const ParameterStore& store,
    const std::vector<GradientBucket>& buckets, const std::string& who);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_REPLICAS_H_
