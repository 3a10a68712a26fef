#include "planner/strategy_traits.h"

#include <cstring>

#include "absl/status/statusor.h"

namespace mtb::planner {

bool FlagApplies(StrategyKind kind, const std::string& flag) {
  for (const char* scoped : EntryFor(kind).flags) {
    if (flag == scoped) return true;
  }
  return false;
}

bool FlagApplies(const std::string& strategy, const std::string& flag) {
  const absl::StatusOr<StrategyKind> kind = ParseStrategy(strategy);
  return kind.ok() && FlagApplies(*kind, flag);
}

bool GathersParametersPerUnit(StrategyKind kind) {
  return FlagApplies(kind, "reshard_after_forward");
}

bool GathersParametersPerUnit(const std::string& strategy) {
  return FlagApplies(strategy, "reshard_after_forward");
}

bool SyncsGradientsByAllReduce(StrategyKind kind) {
  return std::strlen(EntryFor(kind).gather_bytes_label) == 0;
}

bool SyncsGradientsByAllReduce(const std::string& strategy) {
  const absl::StatusOr<StrategyKind> kind = ParseStrategy(strategy);
  return kind.ok() && SyncsGradientsByAllReduce(*kind);
}

}  // namespace mtb::planner
