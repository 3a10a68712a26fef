// The files a comm_bench run writes besides its stdout table: the JSON result
// (CommBenchResult through protobuf's JSON mapping), a Markdown summary and an
// SVG plot of busbw against size, one line per collective and placement.
#ifndef MTB_COMM_BENCH_REPORT_FILES_H_
#define MTB_COMM_BENCH_REPORT_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "comm_bench/comm_bench.pb.h"

namespace mtb::comm_bench {

std::string RenderMarkdown(const CommBenchResult& result);
std::string RenderBusbwSvg(const CommBenchResult& result);

struct OutputPaths {
  std::string json;      // always written
  std::string markdown;  // "" = not written
  std::string svg;       // "" = not written
};

// Writes each file atomically; errors name the path.
absl::Status WriteOutputs(const CommBenchResult& result,
                          const OutputPaths& paths);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_REPORT_FILES_H_
