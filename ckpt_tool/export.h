// `ckpt_tool export PATH --format=torch --out=FILE`: a checkpoint's full
// model as a PyTorch state dict (docs/checkpoint.md, "Export").
#ifndef MTB_CKPT_TOOL_EXPORT_H_
#define MTB_CKPT_TOOL_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mtb::ckpt_tool {

struct ExportOptions {
  std::string dtype = "fp32";  // "fp32" or "bf16"
};

// Verifies checkpoint directory `dir` (a corrupt or incomplete one is
// refused: the error names the file), assembles every "model/" tensor from
// its shards and writes them to `out` (atomically) as a pickled
// Dict[str, Tensor] that Python's torch.load reads: HF GPT-2 names, plus
// "lm_head.weight" (a copy of the tied token embedding). Linear weights
// stay (out, in), as nn.Linear and our model hold them, not HF's Conv1D
// (in, out). Returns the names written, in order.
absl::StatusOr<std::vector<std::string>> ExportTorch(const std::string& dir, const std::string& out,
                                                     const ExportOptions& options);

}  // namespace mtb::ckpt_tool

#endif  // MTB_CKPT_TOOL_EXPORT_H_
