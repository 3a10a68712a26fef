// The factory of every registry entry (trainer/strategy/registry.h), keyed by
// the same kind: the registry stays torch-free, the factories build LibTorch
// strategies. A new strategy adds its entry there and its factory here;
// factory_test checks that every entry has one.
#ifndef MTB_TRAINER_STRATEGY_FACTORY_H_
#define MTB_TRAINER_STRATEGY_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/registry.h"
#include "trainer/strategy/sync_fault.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The strategy `config` names for this rank over `communicator` (nullptr on
// one rank), with `sync_fault` (tests only; kInvalidArgument when the
// strategy cannot apply it).
absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(
    const TrainConfig& config, collective::Communicator* communicator,
    const SyncTestFault& sync_fault = {});

// Whether `kind` has a factory (factory_test: every registry entry does).
bool HasFactory(StrategyKind kind);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_FACTORY_H_
