#include "trainer/strategy/sync_fault.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mtb {
namespace {

std::vector<StrategyKind> StrategiesFor(SyncTestFault::Kind kind) {
  switch (kind) {
    case SyncTestFault::Kind::kNone:
      return AllStrategies();
    case SyncTestFault::Kind::kSumNotAverage:
    case SyncTestFault::Kind::kBucketNeverSynced:
      return {StrategyKind::kDdp, StrategyKind::kZero1, StrategyKind::kZero2};
    case SyncTestFault::Kind::kParameterUnreduced:
      return {StrategyKind::kDdp};
    case SyncTestFault::Kind::kKeepFullGradients:
      return {StrategyKind::kZero2};
    case SyncTestFault::Kind::kKeepGatheredUnits:
      return {StrategyKind::kFsdp};
  }
  return {};
}

}  // namespace

absl::StatusOr<SyncTestFault> ParseSyncTestFault(const std::string& text) {
  SyncTestFault fault;
  if (text.empty()) return fault;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string argument =
      colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "sum_not_average" && colon == std::string::npos) {
    fault.kind = SyncTestFault::Kind::kSumNotAverage;
    return fault;
  }
  if (kind == "keep_full_gradients" && colon == std::string::npos) {
    fault.kind = SyncTestFault::Kind::kKeepFullGradients;
    return fault;
  }
  if (kind == "keep_gathered_units" && colon == std::string::npos) {
    fault.kind = SyncTestFault::Kind::kKeepGatheredUnits;
    return fault;
  }
  if (kind == "bucket_never_synced" &&
      absl::SimpleAtoi(argument, &fault.bucket) && fault.bucket >= 0) {
    fault.kind = SyncTestFault::Kind::kBucketNeverSynced;
    return fault;
  }
  if (kind == "parameter_unreduced" && !argument.empty()) {
    fault.kind = SyncTestFault::Kind::kParameterUnreduced;
    fault.parameter = argument;
    return fault;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--testonly_sync_fault=", text,
      ": expected sum_not_average, bucket_never_synced:<bucket index>, "
      "parameter_unreduced:<parameter name>, keep_full_gradients or "
      "keep_gathered_units"));
}

std::string SyncTestFaultName(const SyncTestFault& fault) {
  switch (fault.kind) {
    case SyncTestFault::Kind::kNone:
      return "";
    case SyncTestFault::Kind::kSumNotAverage:
      return "sum_not_average";
    case SyncTestFault::Kind::kBucketNeverSynced:
      return absl::StrCat("bucket_never_synced:", fault.bucket);
    case SyncTestFault::Kind::kParameterUnreduced:
      return absl::StrCat("parameter_unreduced:", fault.parameter);
    case SyncTestFault::Kind::kKeepFullGradients:
      return "keep_full_gradients";
    case SyncTestFault::Kind::kKeepGatheredUnits:
      return "keep_gathered_units";
  }
  return "";
}

absl::Status CheckSyncTestFaultApplies(const SyncTestFault& fault,
                                       StrategyKind strategy) {
  const std::vector<StrategyKind> strategies = StrategiesFor(fault.kind);
  for (StrategyKind kind : strategies) {
    if (kind == strategy) return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (StrategyKind kind : strategies) names.push_back(StrategyName(kind));
  return absl::InvalidArgumentError(absl::StrCat(
      "--testonly_sync_fault=", SyncTestFaultName(fault), " applies to --strategy=",
      absl::StrJoin(names, ", "), " only, not ", StrategyName(strategy)));
}

}  // namespace mtb
