#include "trainer/checkpoint/agreement.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/results/json_io.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "trainer/checkpoint/data_identity.h"
#include "trainer/strategy/scalars.h"

namespace mtb::checkpoint {
namespace {

std::string FieldText(const google::protobuf::Message& message,
                      const google::protobuf::FieldDescriptor* field) {
  std::string value;
  if (field->is_repeated()) {
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    std::vector<std::string> items;
    const int count = message.GetReflection()->FieldSize(message, field);
    for (int i = 0; i < count; ++i) {
      std::string item;
      printer.PrintFieldValueToString(message, field, i, &item);
      items.push_back(item);
    }
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  google::protobuf::TextFormat::PrintFieldValueToString(message, field, -1, &value);
  return value;
}

// "rank 0 X, ranks 1, 3 Y" for one field's values by rank.
std::string ByValue(const std::vector<std::string>& values) {
  std::map<std::string, std::vector<int>> ranks_of;
  std::vector<std::string> order;
  for (size_t r = 0; r < values.size(); ++r) {
    if (ranks_of.count(values[r]) == 0) order.push_back(values[r]);
    ranks_of[values[r]].push_back(static_cast<int>(r));
  }
  std::vector<std::string> parts;
  for (const std::string& value : order) {
    const std::vector<int>& ranks = ranks_of[value];
    parts.push_back(absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                                 absl::StrJoin(ranks, ", "), " ", value.empty() ? "\"\"" : value));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

RunAgreement AgreementOf(const TrainConfig& config, const CheckpointPlan& plan) {
  RunAgreement agreement;
  agreement.set_config_json(ToJson(config));
  if (!plan.data_identity.kind().empty()) {
    *agreement.mutable_data() = plan.data_identity;
  } else if (absl::StatusOr<DataIdentity> data = IdentifyData(config, /*full=*/false); data.ok()) {
    *agreement.mutable_data() = *data;
  }
  agreement.set_resume_dir(plan.resume_dir);
  agreement.set_resume_manifest_sha256(plan.resume_manifest_sha256);
  agreement.set_start_step(plan.start_step);
  return agreement;
}

absl::Status CheckRanksAgree(const std::vector<RunAgreement>& ranks) {
  if (ranks.size() <= 1) return absl::OkStatus();
  std::vector<TrainConfig> configs(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (absl::Status parsed = FromJson(ranks[r].config_json(), &configs[r]); !parsed.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", r, "'s configuration does not parse: ", parsed.message()));
    }
  }
  bool same_data = true;
  for (size_t r = 1; r < ranks.size(); ++r) {
    same_data &= DataDifferences(ranks[0].data(), ranks[r].data()).empty();
  }
  std::vector<std::string> differences;
  const google::protobuf::Descriptor* descriptor = TrainConfig::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->name() == "data" && same_data) continue;
    std::vector<std::string> values;
    for (const TrainConfig& config : configs) values.push_back(FieldText(config, field));
    if (std::all_of(values.begin(), values.end(),
                    [&](const std::string& v) { return v == values[0]; })) {
      continue;
    }
    differences.push_back(absl::StrCat("--", field->name(), ": ", ByValue(values)));
  }
  auto compare = [&](const std::string& what, auto value_of) {
    std::vector<std::string> values;
    for (const RunAgreement& rank : ranks) values.push_back(value_of(rank));
    for (const std::string& value : values) {
      if (value != values[0]) {
        differences.push_back(absl::StrCat(what, ": ", ByValue(values)));
        return;
      }
    }
  };
  if (!same_data) {
    compare("data", [](const RunAgreement& r) { return DescribeData(r.data()); });
  }
  compare("resume checkpoint", [](const RunAgreement& r) {
    return r.resume_dir().empty() ? std::string("none (step 0)")
                                  : absl::StrCat(r.resume_dir(), " at step ", r.start_step());
  });
  compare("resume manifest sha256",
          [](const RunAgreement& r) { return r.resume_manifest_sha256(); });
  if (differences.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "ranks disagree before step 1 (every rank must be started with the same training "
      "flags, data and checkpoint): ",
      absl::StrJoin(differences, "; ")));
}

absl::Status AgreeOnRun(collective::Communicator* communicator, const RunAgreement& mine) {
  ASSIGN_OR_RETURN(const std::vector<std::string> all,
                   AllGatherBytesOverRanks(communicator, mine.SerializeAsString(), "agreement"));
  std::vector<RunAgreement> ranks(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (!ranks[r].ParseFromString(all[r])) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", r, "'s agreement is unreadable"));
    }
  }
  return CheckRanksAgree(ranks);
}

}  // namespace mtb::checkpoint
