#include "trainer/checkpoint/audit.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/results/atomic_file.h"
#include "trainer/checkpoint/checkpoint.h"

namespace mtb::checkpoint {

CheckpointTreeAudit AuditCheckpointTree(const std::string& root) {
  CheckpointTreeAudit audit;
  audit.set_root(root);
  if (absl::StatusOr<std::string> latest = ReadFileToString(root + "/latest"); latest.ok()) {
    const std::string name(absl::StripAsciiWhitespace(*latest));
    if (StepOfDirName(name) >= 0) audit.set_latest(name);
  }
  const int64_t latest_step = audit.latest().empty() ? -1 : StepOfDirName(audit.latest());
  // ListCheckpoints is newest first; the audit reads oldest first.
  std::vector<CheckpointListing> listing = ListCheckpoints(root);
  for (auto it = listing.rbegin(); it != listing.rend(); ++it) {
    AuditedCheckpoint* checkpoint = audit.add_checkpoints();
    checkpoint->set_name(it->name);
    checkpoint->set_step(it->step);
    checkpoint->set_ready(it->ready);
    checkpoint->set_run_id(it->run_id);
    const absl::Status verified = Verify(root + "/" + it->name);
    checkpoint->set_verified(verified.ok());
    if (!verified.ok()) checkpoint->set_error(std::string(verified.message()));
    checkpoint->set_orphan(it->ready && latest_step >= 0 && it->step > latest_step);
    if (!it->ready || !verified.ok()) audit.set_untrusted(audit.untrusted() + 1);
  }
  if (absl::StatusOr<std::vector<std::string>> staging = ListDirectory(root, ".step_", ".tmp");
      staging.ok()) {
    for (const std::string& name : *staging) audit.add_staging(name);
  }
  return audit;
}

std::string DescribeAudit(const CheckpointTreeAudit& audit) {
  std::vector<std::string> checkpoints;
  for (const AuditedCheckpoint& checkpoint : audit.checkpoints()) {
    std::string state;
    if (!checkpoint.ready()) {
      state = "no READY: never published";
    } else if (!checkpoint.verified()) {
      state = absl::StrCat("READY, fails verification: ", checkpoint.error());
    } else {
      state = checkpoint.orphan() ? "verified, an orphan `latest` never named" : "verified";
    }
    checkpoints.push_back(absl::StrCat(checkpoint.name(), " (", state, ")"));
  }
  std::string line = checkpoints.empty() ? "no checkpoint" : absl::StrJoin(checkpoints, ", ");
  absl::StrAppend(&line, "; latest: ", audit.latest().empty() ? "none" : audit.latest());
  if (audit.staging_size() > 0) {
    absl::StrAppend(&line, "; staging ", absl::StrJoin(audit.staging(), ", "),
                    " (a save that never published: ignored)");
  }
  return line;
}

}  // namespace mtb::checkpoint
