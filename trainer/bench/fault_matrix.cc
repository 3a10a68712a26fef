#include "trainer/bench/fault_matrix.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mtb {
namespace {

// The line a fault's rank prints where it acts (common/faults,
// trainer/run/trainer.cc).
bool IsFaultLine(const std::string& text) {
  return absl::StrContains(text, ": killing this rank") ||
         absl::StrContains(text, ": exiting with code") ||
         absl::StrContains(text, ": this rank's loss becomes NaN") ||
         absl::StrContains(text, ": flipped a byte of") ||
         absl::StrContains(text, ": this rank stops making progress");
}

}  // namespace

const std::vector<std::string>& FaultMatrixPhases() {
  static const auto* phases = new std::vector<std::string>{"data",
                                                           "forward",
                                                           "backward",
                                                           "optimizer",
                                                           "checkpoint_write",
                                                           "checkpoint_before_ready",
                                                           "checkpoint_before_latest"};
  return *phases;
}

std::vector<FaultCase> FaultMatrixCases(const std::vector<std::string>& strategies,
                                        const std::vector<std::string>& kinds, bool all_phases) {
  std::vector<FaultCase> cases;
  for (const std::string& strategy : strategies) {
    for (const std::string& kind : kinds) {
      if (kind == "kill") {
        for (const std::string& phase : FaultMatrixPhases()) {
          if (!all_phases && phase != "backward" && phase != "checkpoint_write") continue;
          // Only rank 0 publishes: the publish phases kill rank 0.
          const int rank = absl::StartsWith(phase, "checkpoint_before") ? 0 : 1;
          cases.push_back(
              {strategy, kind, phase, absl::StrCat("kill:rank=", rank, ",step=4,phase=", phase)});
        }
      } else if (kind == "exit") {
        cases.push_back({strategy, kind, "", "exit:rank=1,step=4,code=7"});
      } else if (kind == "nan") {
        cases.push_back({strategy, kind, "", "nan:rank=1,step=3"});
      } else if (kind == "corrupt") {
        cases.push_back(
            {strategy, kind, "", "corrupt:rank=1,step=4;kill:rank=0,step=5,phase=forward"});
      } else if (kind == "hang") {
        cases.push_back({strategy, kind, "", "hang:rank=1,step=4,phase=backward"});
      } else if (kind == "slow") {
        cases.push_back({strategy, kind, "", "slow:rank=1,ms=50"});
      }
    }
  }
  return cases;
}

void ClassifyDetection(const std::vector<StampedLine>& lines, FaultMatrixRow* row) {
  const StampedLine* fault = nullptr;
  for (const StampedLine& line : lines) {
    if (fault == nullptr) {
      // corrupt: the flip is not the failure; what detects it is the
      // verification of the restart that meets it.
      const bool flip = absl::StrContains(line.text, ": flipped a byte of");
      if (IsFaultLine(line.text) && !(flip && row->kind() != "corrupt")) fault = &line;
      continue;
    }
    std::string by;
    if (row->kind() == "corrupt") {
      if (absl::StrContains(line.text, "which fails verification")) {
        by = "checkpoint verification at resume (falls back)";
      }
    } else if (absl::StartsWith(line.text, "launch: heartbeat: no progress")) {
      by = "launcher heartbeat (names the hung rank)";
    } else if (absl::StrContains(line.text, "the loss is not finite")) {
      by = "loss check on every rank (same step, before the update)";
    } else if (absl::StartsWith(line.text, "launch: rank") &&
               absl::StrContains(line.text, "killed by SIGKILL")) {
      by = "launcher: rank SIGKILLed";
    } else if (absl::StartsWith(line.text, "launch: rank") &&
               absl::StrContains(line.text, "exited with code")) {
      by = "launcher: rank exit code";
    }
    if (!by.empty()) {
      row->set_detected_by(by);
      row->set_detect_seconds(absl::ToDoubleSeconds(line.time - fault->time));
      return;
    }
  }
  if (row->kind() == "slow") row->set_detected_by("none (no failure)");
}

std::string RenderFaultMatrixMarkdown(const FaultMatrixResult& result) {
  std::string md = absl::StrCat(
      "# Fault matrix\n\n", result.note(), "\n\nTrainer flags: `", result.trainer_flags(),
      "`\n\n| strategy | fault | detected by | detect s | tree unchanged | restarted | "
      "exact after restart | exit | as expected |\n| --- | --- | --- | ---: | --- | --- | --- "
      "| ---: | --- |\n");
  auto yes = [](bool value) { return value ? "yes" : "no"; };
  int ok = 0;
  for (const FaultMatrixRow& row : result.rows()) {
    ok += row.as_expected() ? 1 : 0;
    absl::StrAppend(&md, "| ", row.strategy(), " | `", row.fault(), "` | ",
                    row.detected_by().empty() ? "-" : row.detected_by(), " | ",
                    row.detected_by().empty() || row.kind() == "slow"
                        ? "-"
                        : absl::StrFormat("%.2f", row.detect_seconds()),
                    " | ", yes(row.tree_unchanged()), " | ", yes(row.restarted()), " | ",
                    row.kind() == "nan" ? "n/a (not restarted)" : yes(row.exact()), " | ",
                    row.exit_code(), " | ",
                    row.as_expected() ? "yes" : absl::StrCat("**no**: ", row.problem()), " |\n");
  }
  absl::StrAppend(&md, "\n", ok, " of ", result.rows_size(), " rows as expected.\n");
  return md;
}

}  // namespace mtb
