// What tp_check writes: the TpCheckResult JSON, an optional Markdown report
// beside it, and the one-line-per-check table printed on stdout.
#ifndef MTB_TP_CHECK_OUTPUT_H_
#define MTB_TP_CHECK_OUTPUT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

// One row per check: check, ranks, tensors ok, max abs and rel error over its
// tensors, collectives measured/expected (calls and bytes per rank, all
// phases), PASS/FAIL (Markdown).
std::string RenderCheckTable(const TpCheckResult& result);

// The report: provenance, options, the table above, then per check every
// tensor and every (phase, op) of collectives against the closed form.
std::string RenderMarkdownReport(const TpCheckResult& result);

// Writes `json_path` and, when `markdown`, the .md beside it as a companion
// (WriteCompanionFile: never over a file this result did not write), each
// atomically. Returns the line for the user ("report: <path>", or why the .md
// was kept; empty without markdown). Errors name the path.
absl::StatusOr<std::string> WriteOutputs(const TpCheckResult& result,
                                         const std::string& json_path,
                                         bool markdown);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_OUTPUT_H_
