// report: reads result files of every tool (trainer, comm_bench, tp_check,
// doctor, ...) through their protos and writes one Markdown document, with
// SVGs beside it, comparing the runs side by side. Runs whose provenance
// differs are refused unless --allow_mixed, and then the differences are
// listed in the report.
//
//   bazel run //report -- results/                 # every *.json in it
//   bazel run //report -- a.json b.json --out=compare.md
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/flags.h"
#include "common/results/atomic_file.h"
#include "common/results/output_path.h"
#include "report/render.h"
#include "report/results_set.h"

ABSL_FLAG(std::string, out, "",
          "the Markdown report (default results/report_<UTC time>.md in the "
          "checkout); SVGs go beside it");
ABSL_FLAG(bool, allow_mixed, false,
          "compare runs whose provenance differs (commit, dirty flag, build "
          "mode, host, library versions), listing the differences");

namespace {

constexpr char kProgram[] = "report";

std::string Stem(const std::string& path) {
  const std::string name = mtb::BaseName(mtb::ReplaceExtension(path, "md"));
  return name.substr(0, name.size() - 3);
}


}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args = mtb::ParseCommandLineOrExit(
      argc, argv,
      "compares result files side by side in one Markdown report.\n"
      "  report FILE.json... | DIR [--out=report.md] [--allow_mixed]",
      mtb::Operands::kAllowed);
  args.erase(args.begin());
  for (std::string& arg : args) arg = mtb::ResolveUserPath(arg);
  if (args.empty()) {
    std::cerr << kProgram << ": give result JSON files or directories\n";
    return mtb::kExitUsage;
  }
  const std::string out = absl::GetFlag(FLAGS_out).empty()
                              ? mtb::DefaultResultPath(kProgram, "md")
                              : mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  if (absl::Status writable = mtb::CheckOutputWritable("out", out); !writable.ok()) {
    return mtb::ReportAndExitCode(kProgram, writable);
  }
  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<mtb::report::ResultFile>> files =
      mtb::report::ReadResultFiles(args, &skipped);
  if (!files.ok()) return mtb::ReportAndExitCode(kProgram, files.status());
  if (!skipped.empty()) {
    std::cerr << kProgram << ": skipped " << skipped.size()
              << " JSON file(s) that are not results (no run_context.tool; "
              << "e.g. flight recorder dumps, traces): "
              << absl::StrJoin(skipped, ", ") << "\n";
  }
  // No output may replace a result it reads: the report, then each SVG
  // once its name is known, all before anything is written.
  std::vector<mtb::NamedPath> inputs;
  for (const mtb::report::ResultFile& file : *files) {
    inputs.push_back({absl::StrCat("the input ", file.path), file.path});
  }
  for (const std::string& path : skipped) {
    inputs.push_back({absl::StrCat("the input ", path), path});
  }
  std::vector<mtb::NamedPath> outputs = {{"--out", out}};
  if (absl::Status distinct = mtb::CheckOutputsAgainstInputs(outputs, inputs);
      !distinct.ok()) {
    return mtb::ReportAndExitCode(kProgram, distinct);
  }
  const std::vector<std::string> differences =
      mtb::report::ProvenanceDifferences(*files);
  if (!differences.empty() && !absl::GetFlag(FLAGS_allow_mixed)) {
    std::cerr << kProgram << ": the runs' provenance differs, so their numbers "
              << "are not comparable (pass --allow_mixed to compare them "
              << "anyway): " << absl::StrJoin(differences, "; ") << "\n";
    return mtb::kExitFailure;
  }
  const mtb::report::RenderedReport report =
      mtb::report::RenderReport(*files, differences, Stem(out));
  for (const auto& [name, svg] : report.svgs) {
    outputs.push_back({absl::StrCat("the plot ", name, " beside --out"),
                       absl::StrCat(mtb::DirectoryOf(out), "/", name)});
  }
  if (absl::Status distinct = mtb::CheckOutputsAgainstInputs(outputs, inputs);
      !distinct.ok()) {
    return mtb::ReportAndExitCode(kProgram, distinct);
  }
  if (absl::Status written = mtb::WriteFileAtomically(out, report.markdown);
      !written.ok()) {
    return mtb::ReportAndExitCode(kProgram, written);
  }
  std::cout << report.markdown << "\nreport: " << out << "\n";
  for (const auto& [name, svg] : report.svgs) {
    const std::string path = absl::StrCat(mtb::DirectoryOf(out), "/", name);
    absl::StatusOr<std::string> kept = mtb::WriteCompanionFile(path, out, svg);
    if (!kept.ok()) return mtb::ReportAndExitCode(kProgram, kept.status());
    std::cout << (kept->empty() ? absl::StrCat("plot: ", path) : *kept) << "\n";
  }
  return mtb::kExitOk;
}
