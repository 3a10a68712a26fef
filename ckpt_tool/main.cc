// ckpt_tool: looks at distributed checkpoints (docs/checkpoint.md).
//   ckpt_tool inspect PATH [--json]   step, strategy, world size, tensors, bytes per rank
//   ckpt_tool verify PATH             READY, manifest, every file's size and SHA-256,
//                                     shard headers, every tensor covered exactly once
//   ckpt_tool compare LEFT RIGHT [--tolerance=X] [--json]
//                                     model, optimizer, scheduler, train state and data
//                                     position over the logical global tensors
//   ckpt_tool prune ROOT --keep_last=N [--run_id=ID] [--dry_run]
//                                     the trainer's retention, offline
//   ckpt_tool export PATH --format=torch --out=FILE [--dtype=fp32|bf16]
//                                     the full model as a PyTorch state dict (HF names)
//   ckpt_tool export PATH --format=safetensors --out=DIR [--dtype=fp32|bf16]
//                                     a Hugging Face GPT-2 directory: model.safetensors
//                                     (Conv1D orientation) and config.json
// PATH is a checkpoint directory, or a checkpoint root (its `latest`).
// Exit codes: 0 fine (compare: equal), 1 a problem with the checkpoint or a
// difference (named), 2 usage.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "ckpt_tool/export.h"
#include "ckpt_tool/export_safetensors.h"
#include "ckpt_tool/tool.h"
#include "common/base/flags.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/compare.h"

ABSL_FLAG(bool, json, false, "inspect, compare: print the result as JSON");
ABSL_FLAG(double, tolerance, 0,
          "compare: elements within this absolute difference count as equal "
          "(0: bit for bit)");
ABSL_FLAG(int64_t, keep_last, 0, "prune: keep the newest N checkpoints of the run (N >= 1)");
ABSL_FLAG(std::string, run_id, "",
          "prune: the run whose checkpoints are pruned (default: the run `latest` names); "
          "other runs' checkpoints are never touched");
ABSL_FLAG(bool, dry_run, false, "prune: list what would be deleted, delete nothing");
ABSL_FLAG(std::string, format, "", "export: the output format (torch or safetensors)");
ABSL_FLAG(std::string, out, "",
          "export: the file (torch) or directory (safetensors) to write (must not exist)");
ABSL_FLAG(std::string, dtype, "fp32", "export: fp32 or bf16");

namespace {
constexpr char kProgram[] = "ckpt_tool";
constexpr char kUsage[] =
    "inspects, verifies, compares, prunes and exports distributed checkpoints.\n"
    "  ckpt_tool inspect PATH [--json]\n"
    "  ckpt_tool verify PATH\n"
    "  ckpt_tool compare LEFT RIGHT [--tolerance=X] [--json]\n"
    "  ckpt_tool prune ROOT --keep_last=N [--run_id=ID] [--dry_run]\n"
    "  ckpt_tool export PATH --format=torch --out=FILE [--dtype=fp32|bf16]\n"
    "  ckpt_tool export PATH --format=safetensors --out=DIR [--dtype=fp32|bf16]";

int Fail(const absl::Status& status) {
  std::cerr << kProgram << ": " << status.message() << "\n";
  return mtb::kExitFailure;
}

int Usage(const std::string& message) {
  std::cerr << kProgram << ": " << message << "\n";
  return mtb::kExitUsage;
}

// PATH resolved to a checkpoint directory, printing how `latest` resolved.
absl::StatusOr<std::string> DirOf(const std::string& path) {
  std::vector<std::string> notes;
  absl::StatusOr<std::string> dir = mtb::ckpt_tool::CheckpointDirOf(path, &notes);
  for (const std::string& note : notes) std::cerr << "note: " << note << "\n";
  return dir;
}

int Compare(const std::string& left_path, const std::string& right_path) {
  const double tolerance = absl::GetFlag(FLAGS_tolerance);
  if (!(tolerance >= 0)) return Usage("--tolerance must be >= 0");
  absl::StatusOr<std::string> left = DirOf(left_path);
  if (!left.ok()) return Fail(left.status());
  absl::StatusOr<std::string> right = DirOf(right_path);
  if (!right.ok()) return Fail(right.status());
  absl::StatusOr<mtb::checkpoint::CheckpointComparison> comparison =
      mtb::checkpoint::Compare(*left, *right, tolerance);
  if (!comparison.ok()) return Fail(comparison.status());
  std::cout << (absl::GetFlag(FLAGS_json) ? mtb::ToJson(*comparison)
                                          : mtb::checkpoint::RenderComparison(*comparison));
  return comparison->equal() ? mtb::kExitOk : mtb::kExitFailure;
}

int Prune(const std::string& root) {
  const int64_t keep_last = absl::GetFlag(FLAGS_keep_last);
  if (keep_last < 1) {
    return Usage("--keep_last must be >= 1 (the newest checkpoint is never pruned)");
  }
  if (!mtb::PathExists(root)) return Fail(absl::NotFoundError(absl::StrCat(root, ": no such directory")));
  std::string run_id = absl::GetFlag(FLAGS_run_id);
  if (run_id.empty()) {
    absl::StatusOr<std::string> latest = mtb::checkpoint::LatestRunId(root);
    if (!latest.ok()) return Fail(latest.status());
    run_id = *latest;
  }
  const bool dry_run = absl::GetFlag(FLAGS_dry_run);
  int removed = 0;
  for (const mtb::checkpoint::PruneDecision& decision :
       mtb::checkpoint::PlanPrune(root, run_id, static_cast<int>(keep_last))) {
    removed += decision.remove;
    std::cout << (decision.remove ? (dry_run ? "would delete " : "delete ") : "keep ")
              << decision.name << " (" << decision.why << ")\n";
  }
  if (dry_run) {
    std::cout << "dry run: " << removed << " checkpoint(s) of run " << run_id
              << " would be deleted; nothing was\n";
    return mtb::kExitOk;
  }
  absl::StatusOr<std::vector<std::string>> deleted =
      mtb::checkpoint::Prune(root, run_id, static_cast<int>(keep_last));
  if (!deleted.ok()) return Fail(deleted.status());
  std::cout << "deleted " << deleted->size() << " checkpoint(s) of run " << run_id << "\n";
  return mtb::kExitOk;
}

int Export(const std::string& path) {
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "torch" && format != "safetensors") {
    return Usage(absl::StrCat("--format=", format, ": expected --format=torch or safetensors"));
  }
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype != "fp32" && dtype != "bf16") return Usage(absl::StrCat("--dtype=", dtype, ": expected fp32 or bf16"));
  if (absl::GetFlag(FLAGS_out).empty()) {
    return Usage(format == "torch" ? "export needs --out=FILE" : "export needs --out=DIR");
  }
  const std::string out = mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  if (mtb::PathExists(out)) {
    return Usage(absl::StrCat("--out=", absl::GetFlag(FLAGS_out), " exists: refusing to overwrite it"));
  }
  absl::StatusOr<std::string> dir = DirOf(path);
  if (!dir.ok()) return Fail(dir.status());
  if (format == "safetensors") {
    absl::StatusOr<std::vector<std::string>> names =
        mtb::ckpt_tool::ExportSafetensors(*dir, out, mtb::ckpt_tool::ExportOptions{dtype});
    if (!names.ok()) return Fail(names.status());
    std::cout << out << ": model.safetensors (" << names->size() << " tensors, " << dtype
              << "; Hugging Face GPT-2 names, Conv1D (in, out) projections, lm_head tied) "
                 "and config.json from "
              << *dir << "\n";
    return mtb::kExitOk;
  }
  absl::StatusOr<std::vector<std::string>> names =
      mtb::ckpt_tool::ExportTorch(*dir, out, mtb::ckpt_tool::ExportOptions{dtype});
  if (!names.ok()) {
    return Fail(absl::Status(names.status().code(),
                             absl::StrCat("export to ", out, " failed (nothing was written "
                                          "there): ", names.status().message())));
  }
  std::cout << out << ": " << names->size() << " tensors (" << dtype
            << "; Hugging Face GPT-2 names; linear weights (out, in) as nn.Linear, not "
               "Conv1D's (in, out)) from "
            << *dir << "\n";
  return mtb::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args = mtb::ParseCommandLineOrExit(argc, argv, kUsage, mtb::Operands::kAllowed);
  const std::string command = args.size() > 1 ? args[1] : "";
  const size_t operands = command == "compare" ? 2 : 1;
  constexpr char kExpected[] =
      "expected `inspect PATH`, `verify PATH`, `compare LEFT RIGHT`, `prune ROOT "
      "--keep_last=N` or `export PATH --format=torch|safetensors --out=PATH`";
  if (command.empty()) return Usage(absl::StrCat("no command: ", kExpected));
  if (command != "inspect" && command != "verify" && command != "compare" &&
      command != "prune" && command != "export") {
    return Usage(absl::StrCat("unknown command '", command, "': ", kExpected));
  }
  if (args.size() != 2 + operands) {
    return Usage(absl::StrCat(command, " takes ", operands, " path(s), got ", args.size() - 2,
                              ": ", kExpected));
  }
  // Relative to the user's checkout under `bazel run` (the binary runs in
  // its runfiles), as every other tool's paths.
  const std::string path = mtb::ResolveUserPath(args[2]);
  if (command == "compare") return Compare(path, mtb::ResolveUserPath(args[3]));
  if (command == "prune") return Prune(path);
  if (command == "export") return Export(path);
  if (command == "inspect") {
    absl::StatusOr<mtb::ckpt_tool::CheckpointSummary> summary = mtb::ckpt_tool::Inspect(path);
    if (!summary.ok()) return Fail(summary.status());
    std::cout << (absl::GetFlag(FLAGS_json) ? mtb::ToJson(*summary)
                                            : mtb::ckpt_tool::RenderSummary(*summary));
    return mtb::kExitOk;
  }
  std::vector<std::string> notes;
  absl::StatusOr<std::string> dir = mtb::ckpt_tool::VerifyPath(path, &notes);
  if (!dir.ok()) return Fail(dir.status());
  for (const std::string& note : notes) std::cout << "note: " << note << "\n";
  std::cout << *dir << ": OK (READY, manifest, every file's size and SHA-256, shard "
                       "headers, every tensor covered exactly once)\n";
  return mtb::kExitOk;
}
