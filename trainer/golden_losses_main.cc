// golden_losses: prints testdata/golden_losses_tiny.txt's contents, computed
// now (see trainer/golden.h).
#include <iostream>

#include "common/base/flags.h"
#include "trainer/golden.h"

int main(int argc, char** argv) {
  mtb::ParseCommandLineOrExit(
      argc, argv,
      "prints the golden first losses: bazel run //trainer:golden_losses > "
      "testdata/golden_losses_tiny.txt");
  absl::StatusOr<std::vector<double>> losses =
      mtb::TrainLosses(mtb::GoldenConfig());
  if (!losses.ok()) return mtb::ReportAndExitCode("golden_losses", losses.status());
  std::cout << mtb::FormatGoldenLosses(*losses);
  return mtb::kExitOk;
}
