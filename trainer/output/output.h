// What the trainer writes: the TrainResult JSON, a Markdown summary and a
// loss-curve SVG beside it, and the short table printed at the end.
#ifndef MTB_TRAINER_OUTPUT_OUTPUT_H_
#define MTB_TRAINER_OUTPUT_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The summary table (Markdown) printed to stdout and put in the report.
std::string RenderSummaryTable(const TrainResult& result);

// The Markdown report: configuration, model, summary and per-step table of
// the first run, linking the SVG by file name.
std::string RenderMarkdownReport(const TrainResult& result,
                                 const std::string& svg_file_name);

// Loss vs step, one series per run.
std::string RenderLossCurveSvg(const TrainResult& result);

// Writes `json_path` and, when `markdown`, the .md and .svg beside it (same
// stem) as companions (WriteCompanionFile: never over a file this result did
// not write), each atomically. Returns one line per companion for the user:
// "report: <path>", "plot: <path>", or why it was kept. Errors name the path.
absl::StatusOr<std::vector<std::string>> WriteTrainOutputs(
    const TrainResult& result, const std::string& json_path, bool markdown);

}  // namespace mtb

#endif  // MTB_TRAINER_OUTPUT_OUTPUT_H_
