// profiler_agg: reads the per-rank traces of one run (a --trace_dir) and
// reports phases across ranks, stragglers, exposed communication and the
// measured overlap; writes a ProfilerAggResult JSON with a Markdown summary,
// an SVG timeline of one step and the merged, clock-aligned trace beside it.
// `forensics DIR` instead reads a run's flight recorder dumps and names the
// rank and collective where the group diverged (profiler_agg/forensics.h).
//
//   bazel run //profiler_agg -- traces/ [--step=N] [--out=PATH]
//   bazel run //profiler_agg -- forensics logs/ [--out=PATH]
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/flags.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "profiler_agg/analysis.h"
#include "profiler_agg/forensics.h"

ABSL_FLAG(std::string, out, "",
          "result JSON (default results/profiler_agg_<UTC time>.json); the "
          ".md, the step SVG and the merged trace go beside it");
ABSL_FLAG(int32_t, step, 0, "the step drawn in the SVG timeline (0: the middle one)");

namespace {
constexpr char kProgram[] = "profiler_agg";

// `profiler_agg forensics DIR`: the verdict on stdout, the ForensicsResult
// JSON at --out. Exit 0 once analysed (the verdict is what it found), 2 for a
// folder without dumps, 1 for a dump that does not parse.
int Forensics(int argc, char** argv, const std::string& directory) {
  const std::string out =
      absl::GetFlag(FLAGS_out).empty()
          ? mtb::DefaultResultPath("profiler_agg_forensics", "json")
          : mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  std::vector<mtb::NamedPath> inputs;
  if (absl::StatusOr<std::vector<std::string>> names = mtb::ListDirectory(directory);
      names.ok()) {
    for (const std::string& name : *names) {
      inputs.push_back({absl::StrCat("the input ", name), directory + "/" + name});
    }
  }
  if (absl::Status distinct = mtb::CheckOutputsAgainstInputs({{"--out", out}}, inputs);
      !distinct.ok()) {
    return mtb::ReportAndExitCode(kProgram, distinct);
  }
  if (absl::Status writable = mtb::CheckOutputWritable("out", out); !writable.ok()) {
    return mtb::ReportAndExitCode(kProgram, writable);
  }
  absl::StatusOr<std::vector<mtb::profiler_agg::FlightDumpFile>> dumps =
      mtb::profiler_agg::ReadFlightDumps(directory);
  if (!dumps.ok()) return mtb::ReportAndExitCode(kProgram, dumps.status());
  mtb::RunContext context = mtb::NewRunContext(kProgram, argc, argv);
  mtb::profiler_agg::ForensicsResult result =
      mtb::profiler_agg::AnalyzeFlightDumps(*dumps);
  result.set_directory(directory);
  mtb::FinishRunContext(&context);
  *result.mutable_run_context() = context;
  if (absl::Status written = mtb::WriteJsonFile(result, out); !written.ok()) {
    return mtb::ReportAndExitCode(kProgram, written);
  }
  std::cout << mtb::profiler_agg::RenderForensics(result) << "\nresult: " << out
            << "\n";
  return mtb::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args = mtb::ParseCommandLineOrExit(
      argc, argv,
      "merges the per-rank traces of one run: phases, stragglers, overlap;\n"
      "or names where a group diverged from its flight recorder dumps.\n"
      "  profiler_agg TRACE_DIR [--step=N] [--out=PATH]\n"
      "  profiler_agg forensics LOG_DIR [--out=PATH]",
      mtb::Operands::kAllowed);
  if (args.size() >= 2 && args[1] == "forensics") {
    if (args.size() != 3) {
      std::cerr << kProgram
                << ": forensics takes one folder of flight recorder dumps (a "
                   "run's --log_dir)\n";
      return mtb::kExitUsage;
    }
    return Forensics(argc, argv, mtb::ResolveUserPath(args[2]));
  }
  if (args.size() != 2) {
    std::cerr << kProgram << ": give one trace directory (a run's --trace_dir)\n";
    return mtb::kExitUsage;
  }
  if (absl::GetFlag(FLAGS_step) < 0) {
    std::cerr << kProgram << ": --step=" << absl::GetFlag(FLAGS_step)
              << " must be >= 1, a step in the traces (0: the middle one)\n";
    return mtb::kExitUsage;
  }
  const std::string out = absl::GetFlag(FLAGS_out).empty()
                              ? mtb::DefaultResultPath(kProgram, "json")
                              : mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  const std::string trace_dir = mtb::ResolveUserPath(args[1]);
  // No output may replace a trace it reads (or another output): the step
  // SVG's name is known once the step is, so it is checked then, before
  // anything is written.
  std::vector<mtb::NamedPath> trace_inputs;
  if (absl::StatusOr<std::vector<std::string>> names =
          mtb::ListDirectory(trace_dir, "rank_", ".trace.json");
      names.ok()) {
    for (const std::string& name : *names) {
      trace_inputs.push_back({absl::StrCat("the trace ", name), trace_dir + "/" + name});
    }
  }
  std::vector<mtb::NamedPath> outputs =
      mtb::ResultFileSet(out, {"md", "merged.trace.json"});
  if (absl::Status distinct = mtb::CheckOutputsAgainstInputs(outputs, trace_inputs);
      !distinct.ok()) {
    return mtb::ReportAndExitCode(kProgram, distinct);
  }
  if (absl::Status writable = mtb::CheckOutputWritable("out", out); !writable.ok()) {
    return mtb::ReportAndExitCode(kProgram, writable);
  }
  absl::StatusOr<std::vector<mtb::profiler_agg::RankTrace>> traces =
      mtb::profiler_agg::ReadTraces(trace_dir);
  if (!traces.ok()) return mtb::ReportAndExitCode(kProgram, traces.status());
  mtb::RunContext context = mtb::NewRunContext(kProgram, argc, argv);
  mtb::profiler_agg::ProfilerAggResult result = mtb::profiler_agg::Analyze(*traces);
  int step = absl::GetFlag(FLAGS_step);
  if (step <= 0 && result.arrivals_size() > 0) {
    step = result.arrivals(result.arrivals_size() / 2).step();
  }
  const std::string svg = mtb::profiler_agg::RenderStepTimelineSvg(*traces, step);
  if (svg.empty() && absl::GetFlag(FLAGS_step) > 0) {
    std::cerr << kProgram << ": --step=" << step << " is not in the traces\n";
    return mtb::kExitUsage;
  }
  mtb::FinishRunContext(&context);
  *result.mutable_run_context() = context;
  const std::string svg_path =
      mtb::ReplaceExtension(out, absl::StrCat("step", step, ".svg"));
  const std::string md_path = mtb::ReplaceExtension(out, "md");
  const std::string merged_path = mtb::ReplaceExtension(out, "merged.trace.json");
  const std::string svg_name = mtb::BaseName(svg_path);
  outputs.push_back({"the step SVG beside --out", svg_path});
  if (absl::Status distinct = mtb::CheckOutputsAgainstInputs(outputs, trace_inputs);
      !distinct.ok()) {
    return mtb::ReportAndExitCode(kProgram, distinct);
  }
  if (absl::Status written = mtb::WriteJsonFile(result, out); !written.ok()) {
    return mtb::ReportAndExitCode(kProgram, written);
  }
  std::cout << mtb::profiler_agg::RenderMarkdown(result, svg.empty() ? "" : svg_name)
            << "\nresult: " << out << "\n";
  for (const auto& [path, content] :
       std::vector<std::pair<std::string, std::string>>{
           {md_path, mtb::profiler_agg::RenderMarkdown(result, svg.empty() ? "" : svg_name)},
           {svg_path, svg}}) {
    if (content.empty()) continue;
    absl::StatusOr<std::string> kept = mtb::WriteCompanionFile(path, out, content);
    if (!kept.ok()) return mtb::ReportAndExitCode(kProgram, kept.status());
    std::cout << (kept->empty() ? absl::StrCat("wrote: ", path) : *kept) << "\n";
  }
  // JSON has no comments for a companion marker: the merged trace is
  // replaced only when it is an earlier merged trace (its otherData says so).
  mtb::trace::TraceFile earlier;
  const bool exists = mtb::ReadFileToString(merged_path).ok();
  if (exists && (!mtb::ReadJsonFile(merged_path, &earlier).ok() ||
                 earlier.otherdata().tool() != mtb::profiler_agg::kMergedTool)) {
    std::cout << "kept " << merged_path
              << ": it exists and is not a merged trace (remove it, or choose "
                 "another --out)\n";
  } else {
    if (absl::Status written = mtb::WriteJsonFile(
            mtb::profiler_agg::MergeTraces(*traces), merged_path);
        !written.ok()) {
      return mtb::ReportAndExitCode(kProgram, written);
    }
    std::cout << "wrote: " << merged_path << " (open in Perfetto)\n";
  }
  return mtb::kExitOk;
}
