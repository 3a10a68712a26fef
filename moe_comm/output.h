// moe_comm's human outputs: the table printed at the end, the Markdown
// report, and two SVG plots against the skew exponent (uniform = 0): dispatch
// and combine mean time, and drop rate. All are written beside --out as
// companions (common/results/output_path.h).
#ifndef MTB_MOE_COMM_OUTPUT_H_
#define MTB_MOE_COMM_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {

// One row per configuration (benchmark) or per check.
std::string RenderTable(const MoeCommResult& result);

// Provenance line, options, the table, per-config expert loads (benchmark)
// or per-tensor rows (check).
std::string RenderMarkdownReport(const MoeCommResult& result);

// SVG of `metric` ("time" or "drops") against the skew exponent, one series
// per combination of the other sweep parameters. Empty when the sweep has no
// benchmark rows.
std::string RenderSkewPlot(const MoeCommResult& result, const std::string& metric);

// Writes the JSON to `json_path` and, when asked, r.md and (benchmark mode)
// r.time.svg and r.drops.svg beside it. Returns one line per file written or
// kept.
absl::StatusOr<std::vector<std::string>> WriteOutputs(
    const MoeCommResult& result, const std::string& json_path, bool markdown,
    bool plots);

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_OUTPUT_H_
