// The names of TrainConfig's enum values: the spellings the flags take and
// the JSON prints ("zero2", "bf16", "exact", "cosine"), and back. Torch-free
// and below the config's validation, so that every library printing or
// parsing a config can use them.
#ifndef MTB_TRAINER_CONFIG_CONFIG_NAMES_H_
#define MTB_TRAINER_CONFIG_CONFIG_NAMES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The spelling the flag takes and the JSON prints for each enum value
// ("zero2", "bf16", "exact", "cosine"); a number the enum has no value for
// as that number ("7", for the refusal that names it).
std::string ConfigName(TrainConfig::Strategy value);
std::string ConfigName(TrainConfig::Precision value);
std::string ConfigName(TrainConfig::Reduction value);
std::string ConfigName(TrainConfig::LrSchedule value);

// A flag's text as its enum value; kInvalidArgument, one line naming the
// flag and the choices, otherwise ("--precision=fp16 must be fp32 or bf16";
// the strategy's from the registry: "--strategy=zero3 is not a strategy:
// use ...").
absl::StatusOr<TrainConfig::Strategy> StrategyFromName(absl::string_view name);
absl::StatusOr<TrainConfig::Precision> PrecisionFromName(absl::string_view name);
absl::StatusOr<TrainConfig::Reduction> ReductionFromName(absl::string_view name);
absl::StatusOr<TrainConfig::LrSchedule> LrScheduleFromName(
    absl::string_view name);

}  // namespace mtb

#endif  // MTB_TRAINER_CONFIG_CONFIG_NAMES_H_
