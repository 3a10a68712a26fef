// Ranks that agree on everything (docs/checkpoint.md, "Ranks agree"): at
// rendezvous every rank sends what it will train (its resolved
// configuration, data identity and resume point) and every rank compares
// all of them, so ranks started by hand with different flags refuse before
// step 1, naming the fields and the ranks, instead of training apart or
// timing out in a collective that never mentions flags.
#ifndef MTB_TRAINER_CHECKPOINT_AGREEMENT_H_
#define MTB_TRAINER_CHECKPOINT_AGREEMENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/collective/communicator.h"
#include "trainer/checkpoint/checkpoint.pb.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {

// This rank's side: `config` as resolved, the plan's data identity (or the
// config's, computed when the plan has none) and resume point.
RunAgreement AgreementOf(const TrainConfig& config, const CheckpointPlan& plan);

// Compares every rank's agreement (index = rank) with rank 0's.
// kFailedPrecondition, one line: "ranks disagree before step 1: --lr: rank 0
// 0.001, rank 1 0.002; data: ...". The --data path may differ between ranks
// (another host's mount) when the data identities are equal.
absl::Status CheckRanksAgree(const std::vector<RunAgreement>& ranks);

// Collective, every rank once before step 1: all-gathers `mine` and
// CheckRanksAgree; every rank returns the same verdict.
absl::Status AgreeOnRun(collective::Communicator* communicator, const RunAgreement& mine);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_AGREEMENT_H_
