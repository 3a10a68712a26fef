#include "trainer/strategy/factory.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "trainer/config/config_names.h"
#include "trainer/strategy/ddp.h"
#include "trainer/strategy/fsdp.h"
#include "trainer/strategy/zero.h"

namespace mtb {
namespace {

using Factory = absl::StatusOr<std::unique_ptr<Strategy>> (*)(
    const TrainConfig&, collective::Communicator*, const SyncTestFault&);

absl::StatusOr<std::unique_ptr<Strategy>> MakeSingle(
    const TrainConfig&, collective::Communicator* communicator,
    const SyncTestFault&) {
  if (communicator != nullptr && communicator->world_size() != 1) {
    return absl::InvalidArgumentError("--strategy=single runs one rank only");
  }
  return std::unique_ptr<Strategy>(new SingleStrategy());
}

absl::StatusOr<std::unique_ptr<Strategy>> MakeDdp(
    const TrainConfig& config, collective::Communicator* communicator,
    const SyncTestFault& sync_fault) {
  DdpOptions options =
      DdpOptionsFromConfig(config.bucket_cap_mb(), config.grad_sync());
  options.testonly_fault = sync_fault;
  options.overlap = !config.ddp_launch_after_backward();
  return std::unique_ptr<Strategy>(new DdpStrategy(communicator, options));
}

template <int kStage>
absl::StatusOr<std::unique_ptr<Strategy>> MakeZero(
    const TrainConfig& config, collective::Communicator* communicator,
    const SyncTestFault& sync_fault) {
  ZeroOptions options = ZeroOptionsFromConfig(kStage, config.bucket_cap_mb(),
                                              config.grad_sync());
  options.testonly_fault = sync_fault;
  return std::unique_ptr<Strategy>(new ZeroStrategy(communicator, options));
}

absl::StatusOr<std::unique_ptr<Strategy>> MakeFsdp(
    const TrainConfig& config, collective::Communicator* communicator,
    const SyncTestFault& sync_fault) {
  FsdpOptions options =
      FsdpOptionsFromConfig(!config.fsdp_keep_gathered_until_backward(),
                            config.fsdp_prefetch(), config.grad_sync());
  options.testonly_keep_gathered_units =
      sync_fault.kind == SyncTestFault::Kind::kKeepGatheredUnits;
  return std::unique_ptr<Strategy>(new FsdpStrategy(communicator, options));
}

const std::vector<std::pair<StrategyKind, Factory>>& Factories() {
  static const auto* const kFactories =
      new std::vector<std::pair<StrategyKind, Factory>>{
          {StrategyKind::kSingle, &MakeSingle},
          {StrategyKind::kDdp, &MakeDdp},
          {StrategyKind::kZero1, &MakeZero<1>},
          {StrategyKind::kZero2, &MakeZero<2>},
          {StrategyKind::kFsdp, &MakeFsdp},
      };
  return *kFactories;
}

}  // namespace

bool HasFactory(StrategyKind kind) {
  for (const auto& [k, factory] : Factories()) {
    if (k == kind) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<Strategy>> MakeStrategy(
    const TrainConfig& config, collective::Communicator* communicator,
    const SyncTestFault& sync_fault) {
  ASSIGN_OR_RETURN(const StrategyKind kind, ParseStrategy(ConfigName(config.strategy())));
  RETURN_IF_ERROR(CheckSyncTestFaultApplies(sync_fault, kind));
  for (const auto& [k, factory] : Factories()) {
    if (k == kind) return factory(config, communicator, sync_fault);
  }
  return absl::InternalError(
      absl::StrCat("no factory for --strategy=", ConfigName(config.strategy())));
}

}  // namespace mtb
