// `ckpt_tool export PATH --format=safetensors --out=DIR`: a checkpoint's
// model as a Hugging Face GPT-2 directory (docs/checkpoint.md, "Export").
#ifndef MTB_CKPT_TOOL_EXPORT_SAFETENSORS_H_
#define MTB_CKPT_TOOL_EXPORT_SAFETENSORS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ckpt_tool/export.h"

namespace mtb::ckpt_tool {

// Verifies checkpoint directory `dir` (a corrupt or incomplete one is
// refused: the error names the file), assembles every "model/" tensor and
// creates directory `out` holding
//   model.safetensors  HF GPT-2 names ("transformer.h.0.attn.c_attn.weight"),
//                      the four projection weights transposed to Conv1D's
//                      (in, out), fp32 or bf16 (options.dtype); no
//                      lm_head.weight (tied to wte, as save_pretrained writes)
//   config.json        GPT2Config (common/hf/gpt2.h), from the manifest's
//                      configuration
// Both files are written into a staging directory beside `out` that is
// renamed to `out` last, and never over an existing path: kAlreadyExists
// when `out` exists (then or at the rename). Tensors are written in
// GPT-2's parameter order (hf::Gpt2ParameterShapes), whatever the saving
// strategy's layout, and must be exactly those. Returns the tensor names
// written, in order. Equal checkpoints give equal bytes.
absl::StatusOr<std::vector<std::string>> ExportSafetensors(const std::string& dir,
                                                           const std::string& out,
                                                           const ExportOptions& options);

}  // namespace mtb::ckpt_tool

#endif  // MTB_CKPT_TOOL_EXPORT_SAFETENSORS_H_
