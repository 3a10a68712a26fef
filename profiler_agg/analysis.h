// profiler_agg's analysis of one run's per-rank traces: clock alignment,
// phase statistics, stragglers, exposed communication and overlap, and the
// merged trace. Definitions in docs/traces.md.
#ifndef MTB_PROFILER_AGG_ANALYSIS_H_
#define MTB_PROFILER_AGG_ANALYSIS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trace/trace.pb.h"
#include "profiler_agg/profiler_agg.pb.h"

namespace mtb::profiler_agg {

struct RankTrace {
  std::string path;
  trace::TraceFile file;
  // Added to this rank's ts to put it on rank 0's clock, relative to rank 0's
  // start: start_unix_us + clock_offset_us - rank 0's start_unix_us
  // (ReadTraces; just clock_offset_us for traces without start_unix_us).
  double to_rank0_us = 0;
};

// Every rank_*.trace.json in `directory`, parsed strictly. kInvalidArgument
// when there are none (exit 2); kDataLoss naming the file when one is not a
// trace (truncated, foreign), belongs to another run (run_id), repeats a rank
// or the ranks are not 0..n-1 (exit 1).
absl::StatusOr<std::vector<RankTrace>> ReadTraces(const std::string& directory);

// The figures (without run_context).
ProfilerAggResult Analyze(const std::vector<RankTrace>& traces);

// otherData.tool of a merged trace.
inline constexpr char kMergedTool[] = "profiler_agg (merged)";

// All ranks' events on rank 0's clock (ts + to_rank0_us), one process per
// rank: opens in Perfetto as one timeline.
trace::TraceFile MergeTraces(const std::vector<RankTrace>& traces);

// An SVG timeline of `step` (a compute row and a comm row per rank, on the
// aligned clock). Empty when no rank has that step.
std::string RenderStepTimelineSvg(const std::vector<RankTrace>& traces, int step);

// The Markdown summary.
std::string RenderMarkdown(const ProfilerAggResult& result,
                           const std::string& timeline_svg_name);

}  // namespace mtb::profiler_agg

#endif  // MTB_PROFILER_AGG_ANALYSIS_H_
