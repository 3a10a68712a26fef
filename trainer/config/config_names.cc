#include "trainer/config/config_names.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "trainer/strategy/registry.h"

namespace mtb {
namespace {

// The enum value `name` spells, else `refusal`.
template <typename Enum, typename Parse>
absl::StatusOr<Enum> EnumFromName(absl::string_view name, Parse parse,
                                  absl::Status refusal) {
  Enum value;
  if (!parse(std::string(name), &value)) return refusal;
  return value;
}

std::string NameOrNumber(const std::string& name, int value) {
  return name.empty() ? absl::StrCat(value) : name;
}

}  // namespace

std::string ConfigName(TrainConfig::Strategy value) {
  return NameOrNumber(TrainConfig::Strategy_Name(value), value);
}
std::string ConfigName(TrainConfig::Precision value) {
  return NameOrNumber(TrainConfig::Precision_Name(value), value);
}
std::string ConfigName(TrainConfig::Reduction value) {
  return NameOrNumber(TrainConfig::Reduction_Name(value), value);
}
std::string ConfigName(TrainConfig::LrSchedule value) {
  return NameOrNumber(TrainConfig::LrSchedule_Name(value), value);
}

absl::StatusOr<TrainConfig::Strategy> StrategyFromName(absl::string_view name) {
  // The registry's refusal lists the strategies; every name it knows is a
  // value of the enum (trainer/config/config_test.cc checks both ways).
  RETURN_IF_ERROR(FindStrategy(name).status());
  return EnumFromName<TrainConfig::Strategy>(
      name, TrainConfig::Strategy_Parse,
      absl::InternalError(absl::StrCat(
          "--strategy=", name, " is in the registry but not in TrainConfig")));
}

absl::StatusOr<TrainConfig::Precision> PrecisionFromName(absl::string_view name) {
  return EnumFromName<TrainConfig::Precision>(
      name, TrainConfig::Precision_Parse,
      absl::InvalidArgumentError(
          absl::StrCat("--precision=", name, " must be fp32 or bf16")));
}

absl::StatusOr<TrainConfig::Reduction> ReductionFromName(absl::string_view name) {
  return EnumFromName<TrainConfig::Reduction>(
      name, TrainConfig::Reduction_Parse,
      absl::InvalidArgumentError(
          absl::StrCat("--reduction=", name, " must be float or exact")));
}

absl::StatusOr<TrainConfig::LrSchedule> LrScheduleFromName(
    absl::string_view name) {
  return EnumFromName<TrainConfig::LrSchedule>(
      name, TrainConfig::LrSchedule_Parse,
      absl::InvalidArgumentError(
          absl::StrCat("--lr_schedule=", name, " must be constant or cosine")));
}

}  // namespace mtb
