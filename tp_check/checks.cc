#include "tp_check/checks.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "tp_check/attention.h"
#include "tp_check/column_linear.h"
#include "tp_check/mlp.h"
#include "tp_check/row_linear.h"
#include "tp_check/sequence_parallel.h"
#include "tp_check/vocab_parallel_ce.h"

namespace mtb::tp_check {

const std::vector<CheckSpec>& AllChecks() {
  static const auto* checks = new std::vector<CheckSpec>{
      {kColumnLinear, ColumnLinearTensors, ValidateColumnLinear,
       ColumnLinearCollectives, RunColumnLinearCheck},
      {kRowLinear, RowLinearTensors, ValidateRowLinear, RowLinearCollectives,
       RunRowLinearCheck},
      {kMlp, MlpTensors, ValidateMlp, MlpCollectives, RunMlpCheck},
      {kAttention, AttentionTensors, ValidateAttention, AttentionCollectives,
       RunAttentionCheck},
      {kSequenceParallel, SequenceParallelTensors, ValidateSequenceParallel,
       SequenceParallelCollectives, RunSequenceParallelCheck},
      {kVocabParallelCe, VocabParallelCeTensors, ValidateVocabParallelCe,
       VocabParallelCeCollectives, RunVocabParallelCeCheck},
  };
  return *checks;
}

absl::StatusOr<std::vector<const CheckSpec*>> SelectChecks(
    const CheckOptions& options) {
  std::vector<const CheckSpec*> selected;
  if (options.checks().empty()) {
    for (const CheckSpec& spec : AllChecks()) selected.push_back(&spec);
    return selected;
  }
  std::vector<std::string> known;
  for (const CheckSpec& spec : AllChecks()) known.push_back(spec.name);
  std::set<std::string> seen;
  for (const std::string& name : options.checks()) {
    const auto found =
        std::find_if(AllChecks().begin(), AllChecks().end(),
                     [&](const CheckSpec& spec) { return spec.name == name; });
    if (found == AllChecks().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--check=", name, " is not a check; known: ",
                       absl::StrJoin(known, ", ")));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--check names ", name, " twice"));
    }
    selected.push_back(&*found);
  }
  return selected;
}

absl::Status ValidateOptions(const CheckOptions& options, const World& world,
                             const CheckHooks& hooks) {
  ASSIGN_OR_RETURN(const std::vector<const CheckSpec*> selected,
                   SelectChecks(options));
  for (const CheckSpec* spec : selected) {
    RETURN_IF_ERROR(spec->validate(options, world));
  }
  if (!hooks.enabled()) return absl::OkStatus();
  if (hooks.perturb_rank >= world.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--perturb_rank=", hooks.perturb_rank, " must be < ",
                     world.label));
  }
  std::vector<std::string> names;
  for (const CheckSpec* spec : selected) {
    for (const TensorSpec& tensor : spec->tensors()) {
      if (tensor.name == hooks.perturb_tensor) return absl::OkStatus();
      names.push_back(absl::StrCat(spec->name, ":", tensor.name));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--perturb_tensor=", hooks.perturb_tensor,
                   " is not a tensor of the selected checks; they compare ",
                   absl::StrJoin(names, ", ")));
}

absl::StatusOr<TpCheckResult> RunChecks(
    const CheckOptions& options, collective::Communicator& comm,
    const CheckHooks& hooks,
    const std::function<absl::Status()>& after_first_check) {
  RETURN_IF_ERROR(
      ValidateOptions(options, NprocWorld(comm.world_size()), hooks));
  ASSIGN_OR_RETURN(const std::vector<const CheckSpec*> selected,
                   SelectChecks(options));
  LOG_IF(INFO, comm.rank() == 0)
      << "options: B " << options.batch() << ", T " << options.seq_len()
      << ", D " << options.hidden() << ", F " << options.ffn_hidden() << ", "
      << options.heads() << " heads, V " << options.vocab() << ", dropout "
      << options.dropout() << ", seed " << options.seed() << ", rtol "
      << options.rtol() << ", atol " << options.atol() << "; "
      << comm.world_size() << " ranks";
  TpCheckResult result;
  result.set_schema_version(kSchemaVersion);
  *result.mutable_options() = options;
  bool pass = true;
  // Progress on rank 0: a line as each check starts and one as it ends, with
  // its index, its time and the run's, so a long run (large sizes, 4 ranks on
  // 2 cores) shows where it is.
  const absl::Time start = absl::Now();
  const int total = static_cast<int>(selected.size());
  for (int index = 0; index < total; ++index) {
    const CheckSpec* spec = selected[index];
    const std::string label =
        absl::StrCat("check ", index + 1, "/", total, " ", spec->name);
    LOG_IF(INFO, comm.rank() == 0)
        << label << " on " << comm.world_size() << " ranks";
    const absl::Time check_start = absl::Now();
    ASSIGN_OR_RETURN(CheckResult check, spec->run(options, comm, hooks));
    LOG_IF(INFO, comm.rank() == 0) << absl::StreamFormat(
        "%s: %s in %.2f s (%.1f s elapsed, %d to go)", label,
        check.pass() ? "pass" : "FAIL",
        absl::ToDoubleSeconds(absl::Now() - check_start),
        absl::ToDoubleSeconds(absl::Now() - start), total - index - 1);
    pass = pass && check.pass();
    *result.add_checks() = std::move(check);
    if (result.checks_size() == 1 && after_first_check) {
      RETURN_IF_ERROR(after_first_check());
    }
  }
  result.set_pass(pass);
  return result;
}

}  // namespace mtb::tp_check
