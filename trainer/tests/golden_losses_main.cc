// golden_losses: prints testdata/golden_losses_tiny.txt's contents (or, with
// --gemm=onednn, testdata/golden_losses_tiny_onednn.txt's), computed now (see
// trainer/tests/golden.h).
#include <iostream>

#include "absl/flags/flag.h"
#include "common/base/flags.h"
#include "common/gemm/backend.h"
#include "trainer/tests/golden.h"

ABSL_FLAG(std::string, gemm, "blas",
          "the GEMM backend (blas or onednn; docs/gemm.md): each has its own "
          "golden file");

int main(int argc, char** argv) {
  mtb::ParseCommandLineOrExit(
      argc, argv,
      "prints the golden first losses: bazel run //trainer:golden_losses > "
      "testdata/golden_losses_tiny.txt (--gemm=onednn: "
      "testdata/golden_losses_tiny_onednn.txt)");
  const absl::StatusOr<mtb::gemm::Backend> backend =
      mtb::gemm::ParseBackend(absl::GetFlag(FLAGS_gemm));
  if (!backend.ok()) return mtb::ReportAndExitCode("golden_losses", backend.status());
  mtb::gemm::SetDefaultBackend(*backend);
  absl::StatusOr<std::vector<double>> losses =
      mtb::TrainLosses(mtb::GoldenConfig());
  if (!losses.ok()) return mtb::ReportAndExitCode("golden_losses", losses.status());
  std::cout << mtb::FormatGoldenLosses(*losses,
                                       mtb::gemm::BackendName(*backend));
  return mtb::kExitOk;
}
