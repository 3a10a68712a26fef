#include "trainer/strategy_name.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace mtb {

const std::vector<StrategyKind>& AllStrategies() {
  static const std::vector<StrategyKind> kAll = {
      StrategyKind::kDdp, StrategyKind::kZero1, StrategyKind::kZero2,
      StrategyKind::kFsdp, StrategyKind::kSingle};
  return kAll;
}

std::string StrategyName(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kSingle:
      return "single";
    case StrategyKind::kDdp:
      return "ddp";
    case StrategyKind::kZero1:
      return "zero1";
    case StrategyKind::kZero2:
      return "zero2";
    case StrategyKind::kFsdp:
      return "fsdp";
  }
  LOG(FATAL) << "unknown strategy " << static_cast<int>(kind);
}

std::string StrategyChoices() {
  return "ddp, zero1, zero2, fsdp (or single, the one-rank reference)";
}

absl::StatusOr<StrategyKind> ParseStrategy(absl::string_view name) {
  for (StrategyKind kind : AllStrategies()) {
    if (name == StrategyName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--strategy=", name, " is not a strategy: use ", StrategyChoices()));
}

std::string AutoGradSync(StrategyKind kind) {
  return kind == StrategyKind::kZero2 || kind == StrategyKind::kFsdp
             ? "every"
             : "last";
}

}  // namespace mtb
