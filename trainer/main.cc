// trainer: trains the GPT of SPEC §4 on one rank (strategies with more ranks
// come next) and writes a TrainResult JSON, a Markdown summary and a loss
// curve. Everything but flag handling and output lives in //trainer libraries.
#include <iostream>
#include <memory>
#include <string>

#include "ATen/Parallel.h"
#include "absl/flags/flag.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/output_path.h"
#include "common/run_context.h"
#include "common/torch_info.h"
#include "trainer/config.h"
#include "trainer/data.h"
#include "trainer/flags.h"
#include "trainer/output.h"
#include "trainer/strategy.h"
#include "trainer/trainer.h"

ABSL_FLAG(std::string, out, "",
          "result JSON path (default results/trainer_<UTC time>.json in your "
          "checkout); the .md and .svg go beside it");
ABSL_FLAG(bool, markdown, true,
          "also write a Markdown summary and a loss-curve SVG beside --out");

namespace {

constexpr char kUsage[] =
    "trains a GPT decoder and reports loss, throughput and timings.\n"
    "  bazel run //trainer                      # the default job (shipped "
    "corpus)\n"
    "  bazel run //trainer -- --data=synthetic --steps=50 --precision=bf16";

constexpr char kProgram[] = "trainer";

}  // namespace

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::SetProcessLogRank(0);  // one rank for now
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);

  mtb::TrainConfig config = mtb::TrainConfigFromFlags();
  mtb::ResolveConfig(&config, /*ranks_per_host=*/1);
  if (absl::Status status = mtb::ValidateConfig(config); !status.ok()) {
    return mtb::ReportAndExitCode(kProgram, status);
  }
  absl::StatusOr<std::unique_ptr<mtb::DataSource>> data =
      mtb::OpenDataFor(config);
  if (!data.ok()) {
    // A missing or corrupt input file is a usage error: nothing ran.
    std::cerr << kProgram << ": --data: " << data.status().message() << "\n";
    return mtb::kExitUsage;
  }
  const std::string out = absl::GetFlag(FLAGS_out).empty()
                              ? mtb::DefaultResultPath(kProgram, "json")
                              : mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));

  at::set_num_threads(config.intra_op_threads());
  mtb::RunContext context = mtb::NewRunContext(kProgram, argc, argv);
  mtb::FillTorchInfo(&context);
  context.set_world_size(1);
  context.set_backend("none");

  mtb::SingleStrategy strategy;
  absl::StatusOr<mtb::TrainResult> result =
      mtb::RunTraining(config, mtb::RankInfo{0, 1}, strategy, **data);
  if (!result.ok()) return mtb::ReportAndExitCode(kProgram, result.status());

  mtb::FinishRunContext(&context);
  *result->mutable_run_context() = context;
  if (absl::Status status = mtb::WriteTrainOutputs(
          *result, out, absl::GetFlag(FLAGS_markdown));
      !status.ok()) {
    return mtb::ReportAndExitCode(kProgram, status);
  }
  std::cout << mtb::RenderSummaryTable(*result) << "\nresult: " << out << "\n";
  if (absl::GetFlag(FLAGS_markdown)) {
    std::cout << "report: " << mtb::ReplaceExtension(out, "md") << "\n";
  }
  return mtb::kExitOk;
}
