// ckpt_tool: looks at distributed checkpoints (SPEC §5, docs/checkpoint.md).
//   ckpt_tool inspect PATH [--json]   step, strategy, world size, tensors, bytes per rank
//   ckpt_tool verify PATH             READY, manifest, every file's size and SHA-256,
//                                     shard headers, every tensor covered exactly once
// PATH is a checkpoint directory, or a checkpoint root (its `latest`).
// Exit codes: 0 fine, 1 a problem with the checkpoint (named), 2 usage.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "ckpt_tool/tool.h"
#include "common/base/flags.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "trainer/checkpoint/checkpoint.h"

ABSL_FLAG(bool, json, false, "inspect: print the summary as JSON");

namespace {
constexpr char kProgram[] = "ckpt_tool";
constexpr char kUsage[] =
    "inspects and verifies distributed checkpoints.\n"
    "  ckpt_tool inspect PATH [--json]\n"
    "  ckpt_tool verify PATH";

int Fail(const absl::Status& status) {
  std::cerr << kProgram << ": " << status.message() << "\n";
  return mtb::kExitFailure;
}
}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args = mtb::ParseCommandLineOrExit(argc, argv, kUsage);
  if (args.size() != 3 || (args[1] != "inspect" && args[1] != "verify")) {
    std::cerr << kProgram << ": expected `inspect PATH` or `verify PATH`\n";
    return mtb::kExitUsage;
  }
  // Relative to the user's checkout under `bazel run` (the binary runs in
  // its runfiles), as every other tool's paths.
  const std::string path = mtb::ResolveUserPath(args[2]);
  if (args[1] == "inspect") {
    absl::StatusOr<mtb::ckpt_tool::CheckpointSummary> summary = mtb::ckpt_tool::Inspect(path);
    if (!summary.ok()) return Fail(summary.status());
    std::cout << (absl::GetFlag(FLAGS_json) ? mtb::ToJson(*summary)
                                            : mtb::ckpt_tool::RenderSummary(*summary));
    return mtb::kExitOk;
  }
  std::vector<std::string> notes;
  absl::StatusOr<std::string> dir = mtb::ckpt_tool::CheckpointDirOf(path, &notes);
  if (!dir.ok()) return Fail(dir.status());
  for (const std::string& note : notes) std::cout << "note: " << note << "\n";
  if (absl::Status verified = mtb::checkpoint::Verify(*dir); !verified.ok()) {
    return Fail(verified);
  }
  std::cout << *dir << ": OK (READY, manifest, every file's size and SHA-256, shard "
                       "headers, every tensor covered exactly once)\n";
  return mtb::kExitOk;
}
