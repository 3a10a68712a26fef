// The tensor-parallel equivalence matrix (docs/tp.md "Equivalence"): every
// tp in {1, 2, 4} x dp in {1, 2} x strategy in {ddp, zero1, zero2, fsdp} x
// SP off/on (SP only with tp > 1) launches the trainer on tp x dp ranks and
// compares it with one rank on the same global batch by the DDP process
// tests' comparison (trainer/tests/ddp_process_check.h): every step's loss
// (relative 1e-6) and gradient norm (relative 1e-5), every rank's
// parameters equal, rank 0's per tensor against one rank's (rtol 1e-5,
// atol 1e-6, at most 0.1% beyond; none beyond lr / 30). One line per row:
// the verdict, the worst relative loss difference and the parameters beyond
// the tight tier; the failures under a row that fails. Exit 1 if any row
// fails.
//
//   bazel run -c opt //trainer/bench:tp_matrix [-- --only=tp4]
//   bazel run -c opt //trainer/bench:tp_matrix -- --dropout=0.1
//
// --dropout runs the reference and every row with that dropout: the tp
// ranks draw one rank's masks (docs/tp.md "Dropout"), so the same bound
// holds.
//
// 36 launches (and the reference) of up to 8 ranks of the tiny model (TinyTpFlags): minutes on
// a quiet machine with 8 cores. Not a timing benchmark: no figure here
// depends on load.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "trainer/tests/ddp_process_check.h"

ABSL_FLAG(std::string, only, "",
          "run only the rows whose name contains this (e.g. tp4, zero2, _sp)");
ABSL_FLAG(double, dropout, 0.0,
          "dropout of the reference and every row, in [0, 1) (docs/tp.md "
          "\"Dropout\": the same bound holds)");

namespace mtb {
namespace {

constexpr int kGlobalBatch = 4;

struct Row {
  int tp;
  int dp;
  std::string strategy;
  bool sequence_parallel;
  std::string Name() const {
    return absl::StrCat("tp", tp, "_dp", dp, "_", strategy,
                        sequence_parallel ? "_sp" : "");
  }
};

std::vector<Row> Rows() {
  std::vector<Row> rows;
  for (int tp : {1, 2, 4}) {
    for (int dp : {1, 2}) {
      if (tp * dp == 1) continue;  // the reference itself
      for (const char* strategy : {"ddp", "zero1", "zero2", "fsdp"}) {
        for (bool sp : {false, true}) {
          if (sp && tp == 1) continue;
          rows.push_back({tp, dp, strategy, sp});
        }
      }
    }
  }
  return rows;
}

// TinyTpFlags with --dropout's value.
std::vector<std::string> MatrixFlags(double dropout) {
  std::vector<std::string> flags = TinyTpFlags();
  for (std::string& flag : flags) {
    if (absl::StartsWith(flag, "--dropout=")) {
      flag = absl::StrCat("--dropout=", dropout);
    }
  }
  return flags;
}

int Main() {
  const double dropout = absl::GetFlag(FLAGS_dropout);
  if (!(dropout >= 0 && dropout < 1)) {
    std::cerr << "tp_matrix: --dropout=" << dropout << " must be in [0, 1)\n";
    return 2;
  }
  if (std::getenv("TEST_TMPDIR") == nullptr) {
    char dir[] = "/tmp/tp_matrix_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      std::cerr << "tp_matrix: cannot create a temporary directory\n";
      return 1;
    }
    setenv("TEST_TMPDIR", dir, 1);
  }
  std::cout << "launches under " << std::getenv("TEST_TMPDIR") << "\n";
  std::cout << "dropout " << dropout << "\n";
  std::vector<std::string> reference_flags = MatrixFlags(dropout);
  reference_flags.push_back(absl::StrCat("--batch_size=", kGlobalBatch));
  const TrainerLaunch one = RunTrainer("one_rank", 1, reference_flags);
  if (one.exit_code != 0) {
    std::cerr << "tp_matrix: the one-rank reference failed:\n" << one.output;
    return 1;
  }
  const std::string only = absl::GetFlag(FLAGS_only);
  int failed = 0;
  int ran = 0;
  for (const Row& row : Rows()) {
    if (!only.empty() && !absl::StrContains(row.Name(), only)) continue;
    std::vector<std::string> flags = MatrixFlags(dropout);
    flags.push_back(absl::StrCat("--batch_size=", kGlobalBatch / row.dp));
    flags.push_back(absl::StrCat("--strategy=", row.strategy));
    if (row.tp > 1) flags.push_back(absl::StrCat("--tp=", row.tp));
    if (row.sequence_parallel) flags.push_back("--sequence_parallel");
    const TrainerLaunch many = RunTrainer(row.Name(), row.tp * row.dp, flags);
    ++ran;
    if (many.exit_code != 0) {
      ++failed;
      std::cout << row.Name() << ": FAILED to run (exit " << many.exit_code
                << ")\n"
                << many.output << "\n";
      continue;
    }
    const DdpComparison comparison = CompareWithReference(many, one);
    failed += !comparison.ok();
    std::cout << row.Name() << ": " << (comparison.ok() ? "ok" : "FAILED")
              << "; " << absl::StrJoin(comparison.measurements, "; ") << "\n";
    for (const auto& failure : comparison.failures) {
      std::cout << "  FAILED " << failure.message << "\n";
    }
  }
  std::cout << ran - failed << " of " << ran << " rows within the bound\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mtb

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(
      argc, argv,
      "the tp x dp x strategy x SP matrix against one rank (docs/tp.md)");
  return mtb::Main();
}
