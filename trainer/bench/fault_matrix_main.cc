// //trainer/bench:fault_matrix: strategies x fault kinds x phases, each a real
// 2-rank trainer job with --max_restarts=1 and --save_every=2, compared with
// an uninterrupted run of the same strategy. Rows: what detected the fault
// and how fast, whether the checkpoints saved before it are unchanged,
// whether it restarted, and whether the job ended bit for bit equal.
//   bazel run --config=bench //trainer/bench:fault_matrix
// JSON (FaultMatrixResult) + Markdown beside it; exit 1 when a row did not
// behave as its kind must.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "trainer/bench/fault_matrix.h"
#include "trainer/train_result.pb.h"

ABSL_FLAG(std::string, strategies, "ddp,zero1,zero2,fsdp", "strategies to run");
ABSL_FLAG(std::string, kinds, "kill,exit,nan,corrupt,hang,slow", "fault kinds to inject");
ABSL_FLAG(std::string, phases, "",
          "kill phases (comma list; default: all of data, forward, backward, optimizer, "
          "checkpoint_write, checkpoint_before_ready, checkpoint_before_latest)");
ABSL_FLAG(std::string, out, "",
          "result JSON (default results/fault_matrix_<UTC>.json); the .md goes beside it");

namespace mtb {
namespace {

constexpr char kProgram[] = "fault_matrix";

const char* const kTrainerFlags[] = {
    "--vocab_size=64",      "--d_model=32",        "--n_layers=1",      "--n_heads=4",
    "--seq_len=16",         "--batch_size=4",      "--steps=6",         "--timing_warmup_steps=0",
    "--intra_op_threads=1", "--data=synthetic",    "--dropout=0.1",     "--lr_schedule=cosine",
    "--lr_warmup_steps=2",  "--max_grad_norm=0.5", "--peak_flops=1e12", "--nomarkdown",
    "--save_every=2"};

// A hang is seen by the launcher's heartbeat; the teardown then waits the
// kill grace for the ranks stuck in the step (the hung one and its peer in
// the collective it never joins).
constexpr char kHangFlags[] = "--heartbeat_timeout=2s --kill_grace=2s";

std::string Shared() {
  return absl::StrJoin(std::begin(kTrainerFlags), std::end(kTrainerFlags), " ");
}

// Runs `command` with stdout and stderr read line by line as they come,
// each stamped on arrival. Returns the exit code (-1 on a signal).
int RunStamped(const std::string& command, std::vector<StampedLine>* lines) {
  FILE* pipe = ::popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[8192];
  std::string pending;
  while (::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    pending += buffer;
    if (!pending.empty() && pending.back() == '\n') {
      pending.pop_back();
      lines->push_back({absl::Now(), pending});
      pending.clear();
    }
  }
  if (!pending.empty()) lines->push_back({absl::Now(), pending});
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Rank r's shard and meta files of `step_dir` equal the reference's.
bool SameShards(const std::string& reference, const std::string& step_dir) {
  for (int rank = 0; rank < 2; ++rank) {
    for (const char* ext : {"bin", "meta"}) {
      const std::string name = absl::StrFormat("/rank_%05d.%s", rank, ext);
      absl::StatusOr<std::string> want = ReadFileToString(reference + name);
      absl::StatusOr<std::string> got = ReadFileToString(step_dir + name);
      if (!want.ok() || !got.ok() || *want != *got) return false;
    }
  }
  return true;
}

FaultMatrixRow RunCase(const FaultCase& c, const std::string& dir, const std::string& ref) {
  FaultMatrixRow row;
  row.set_strategy(c.strategy);
  row.set_fault(c.fault);
  row.set_kind(c.kind);
  row.set_phase(c.phase);
  const std::string name = absl::StrCat(c.strategy, "_", c.kind, "_", c.phase);
  const std::string ckpt = absl::StrCat(dir, "/", name);
  const std::string out = ckpt + ".json";
  std::vector<StampedLine> lines;
  const absl::Time start = absl::Now();
  row.set_exit_code(RunStamped(
      absl::StrCat("trainer/trainer ", Shared(), " --strategy=", c.strategy,
                   " --max_restarts=1 --checkpoint_dir=", ckpt, " --out=", out, " '--fault=",
                   c.fault, "'", c.kind == "hang" ? absl::StrCat(" ", kHangFlags) : ""),
      &lines));
  row.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  std::string log;
  for (const StampedLine& line : lines) absl::StrAppend(&log, line.text, "\n");
  (void)WriteFileAtomically(ckpt + ".log", log);
  ClassifyDetection(lines, &row);
  TrainResult result;
  const bool have_result = row.exit_code() == 0 && ReadJsonFile(out, &result).ok();
  row.set_restarted(have_result && result.restarts().restarts() == 1);
  row.set_exact(have_result && SameShards(ref + "/step_00000006", ckpt + "/step_00000006"));
  const bool step2_same = SameShards(ref + "/step_00000002", ckpt + "/step_00000002");
  std::vector<std::string> problems;
  if (c.kind == "nan") {
    const std::string latest = ReadFileToString(ckpt + "/latest").value_or("");
    const bool advanced = PathExists(ckpt + "/step_00000004") || latest != "step_00000002\n";
    row.set_tree_unchanged(step2_same && !advanced);
    if (row.exit_code() == 0) problems.push_back("the job did not fail");
    bool exit3 = false, restarted = false;
    for (const StampedLine& line : lines) {
      exit3 |= absl::StrContains(line.text, "exited with code 3");
      restarted |= absl::StartsWith(line.text, "launch: restarting");
    }
    if (!exit3) problems.push_back("no rank exited 3");
    if (restarted) problems.push_back("restarted");
    if (!row.tree_unchanged()) problems.push_back("a checkpoint advanced or changed");
  } else {
    int untrusted = -1;
    if (have_result && result.restarts().attempts_size() == 2) {
      untrusted = result.restarts().attempts(1).tree_at_start().untrusted();
    }
    const int want_untrusted = c.kind == "corrupt" ? 1 : 0;
    if (c.kind == "slow") {
      row.set_tree_unchanged(step2_same);
      if (row.exit_code() != 0) problems.push_back(absl::StrCat("exit ", row.exit_code()));
    } else {
      row.set_tree_unchanged(step2_same && untrusted == want_untrusted);
      if (!row.restarted()) problems.push_back("not restarted");
      if (untrusted != want_untrusted) {
        problems.push_back(absl::StrCat("the restart found ", untrusted, " untrusted"));
      }
    }
    if (!step2_same) problems.push_back("step_00000002 differs from the reference");
    if (!row.exact()) problems.push_back("final shards differ from the reference");
    if (row.detected_by().empty()) problems.push_back("no detection in the output");
  }
  row.set_as_expected(problems.empty());
  row.set_problem(absl::StrJoin(problems, "; "));
  return row;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> strategies =
      absl::StrSplit(absl::GetFlag(FLAGS_strategies), ',', absl::SkipEmpty());
  const std::vector<std::string> kinds =
      absl::StrSplit(absl::GetFlag(FLAGS_kinds), ',', absl::SkipEmpty());
  for (const std::string& kind : kinds) {
    if (kind != "kill" && kind != "exit" && kind != "nan" && kind != "corrupt" && kind != "hang" &&
        kind != "slow") {
      std::cerr << kProgram << ": --kinds: '" << kind
                << "' is not one of kill, exit, nan, corrupt, hang, slow\n";
      return kExitUsage;
    }
  }
  std::vector<std::string> phases = FaultMatrixPhases();
  if (!absl::GetFlag(FLAGS_phases).empty()) {
    phases = absl::StrSplit(absl::GetFlag(FLAGS_phases), ',', absl::SkipEmpty());
    for (const std::string& phase : phases) {
      if (std::find(FaultMatrixPhases().begin(), FaultMatrixPhases().end(), phase) ==
          FaultMatrixPhases().end()) {
        std::cerr << kProgram << ": --phases: '" << phase << "' is not one of "
                  << absl::StrJoin(FaultMatrixPhases(), ", ") << "\n";
        return kExitUsage;
      }
    }
  }
  if (strategies.empty() || kinds.empty()) {
    std::cerr << kProgram << ": --strategies and --kinds must name at least one\n";
    return kExitUsage;
  }
  const std::string out = absl::GetFlag(FLAGS_out).empty()
                              ? DefaultResultPath(kProgram, "json")
                              : ResolveUserPath(absl::GetFlag(FLAGS_out));
  if (absl::Status writable = CheckOutputWritable("out", out); !writable.ok()) {
    return ReportAndExitCode(kProgram, writable);
  }
  std::vector<FaultCase> cases;
  for (const FaultCase& c : FaultMatrixCases(strategies, kinds, /*all_phases=*/true)) {
    if (c.kind == "kill" && std::find(phases.begin(), phases.end(), c.phase) == phases.end()) {
      continue;
    }
    cases.push_back(c);
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/fault_matrix_", ::getpid());
  if (absl::Status made = CreateDirectories(dir); !made.ok()) {
    return ReportAndExitCode(kProgram, made);
  }
  FaultMatrixResult result;
  *result.mutable_run_context() = NewRunContext(kProgram, argc, argv);
  result.mutable_run_context()->set_world_size(2);
  result.mutable_run_context()->set_backend("gloo");
  result.set_trainer_flags(absl::StrCat(Shared(), " --max_restarts=1"));
  int done = 0;
  const absl::Time start = absl::Now();
  for (const std::string& strategy : strategies) {
    const std::string ref = absl::StrCat(dir, "/ref_", strategy);
    std::vector<StampedLine> lines;
    const int code = RunStamped(absl::StrCat("trainer/trainer ", Shared(), " --strategy=", strategy,
                                             " --checkpoint_dir=", ref, " --out=", ref, ".json"),
                                &lines);
    if (code != 0) {
      for (const StampedLine& line : lines) std::cerr << line.text << "\n";
      std::cerr << kProgram << ": the uninterrupted " << strategy << " run exited " << code << "\n";
      return kExitFailure;
    }
    for (const FaultCase& c : cases) {
      if (c.strategy != strategy) continue;
      FaultMatrixRow row = RunCase(c, dir, ref);
      ++done;
      std::cerr << absl::StrFormat("[%d/%d, %.0f s] %s %s: %s%s\n", done, cases.size(),
                                   absl::ToDoubleSeconds(absl::Now() - start), strategy, c.fault,
                                   row.as_expected() ? "as expected" : "NOT: ", row.problem());
      *result.add_rows() = std::move(row);
    }
  }
  result.set_note(absl::StrCat(
      "Each row: a 2-rank job of the trainer with --max_restarts=1 and --save_every=2 (steps "
      "6), the fault acting on its first attempt, compared with an uninterrupted run of the "
      "same strategy; hang rows add ",
      kHangFlags,
      ". detect s: from the fault's own line to "
      "the line that shows it detected, "
      "as stamped on arrival by this command. Logs and checkpoints: ",
      dir, ". The machine is shared: the seconds are noisy."));
  FinishRunContext(result.mutable_run_context());
  if (absl::Status written = WriteJsonFile(result, out); !written.ok()) {
    return ReportAndExitCode(kProgram, written);
  }
  const std::string markdown = RenderFaultMatrixMarkdown(result);
  std::cout << markdown << "result: " << out << "\n";
  absl::StatusOr<std::string> kept = WriteCompanionFile(ReplaceExtension(out, "md"), out, markdown);
  if (!kept.ok()) return ReportAndExitCode(kProgram, kept.status());
  std::cout << (kept->empty() ? "wrote " + ReplaceExtension(out, "md") : *kept) << "\n";
  for (const FaultMatrixRow& row : result.rows()) {
    if (!row.as_expected()) return kExitFailure;
  }
  return kExitOk;
}

}  // namespace
}  // namespace mtb

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv,
                              "strategies x fault kinds x phases with restarts, against "
                              "uninterrupted runs");
  return mtb::Main(argc, argv);
}
