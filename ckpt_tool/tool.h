// ckpt_tool's commands as a library (main.cc only parses the command line):
// inspect and verify a checkpoint directory, or a checkpoint root (its
// `latest`, with the fallbacks resume would take).
#ifndef MTB_CKPT_TOOL_TOOL_H_
#define MTB_CKPT_TOOL_TOOL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ckpt_tool/ckpt_tool.pb.h"

namespace mtb::ckpt_tool {

// The checkpoint directory `path` names: itself when it holds a manifest or
// READY, else the one ResolveLatest picks under it (notes say how).
absl::StatusOr<std::string> CheckpointDirOf(const std::string& path,
                                            std::vector<std::string>* notes);

absl::StatusOr<CheckpointSummary> Inspect(const std::string& path);

// `ckpt_tool verify PATH`: the checkpoint directory that verified. A root
// verifies only when `latest` names a checkpoint that verifies: otherwise
// kDataLoss naming what is wrong with `latest` and the checkpoint a resume
// would fall back to (a root that fell back is not fine: its newest save is
// lost). Notes as for CheckpointDirOf.
absl::StatusOr<std::string> VerifyPath(const std::string& path,
                                       std::vector<std::string>* notes);

// The Markdown tables of a summary.
std::string RenderSummary(const CheckpointSummary& summary);

}  // namespace mtb::ckpt_tool

#endif  // MTB_CKPT_TOOL_TOOL_H_
