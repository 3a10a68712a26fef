// Our GPT's parameters <-> a GPT-2 safetensors file: the conversions export
// (ckpt_tool export --format=safetensors) and import (trainer --init_from)
// share, so that export -> import -> export gives the same bytes.
//
// Our side: parameters by our names ("wte", "h.0.attn.c_attn.weight", ...)
// in our orientation (nn.Linear's (out, in)), fp32. The file's side:
// GPT2LMHeadModel's names, Conv1D's (in, out) for the four projection
// weights (common/hf/gpt2.h), F32 or BF16.
#ifndef MTB_COMMON_HF_GPT2_TENSORS_H_
#define MTB_COMMON_HF_GPT2_TENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "common/hf/gpt2.h"
#include "common/hf/safetensors.h"

namespace mtb::hf {

// (our name, tensor), in the order to write.
using OurParameters = std::vector<std::pair<std::string, at::Tensor>>;

// The parameters of a GPT of `shape`, by our names in our model's order,
// with their shapes in our orientation.
std::vector<std::pair<std::string, std::vector<int64_t>>> Gpt2ParameterShapes(
    const Gpt2Shape& shape);

// model.safetensors for `parameters` (any float dtype, our orientation):
// GPT-2 names, Conv1D weights transposed, every tensor as BF16 when `bf16`
// (rounded to nearest even) else F32; metadata {"format": "pt"}, which
// transformers requires. No lm_head.weight: it is wte (tied).
absl::StatusOr<std::string> EncodeGpt2Safetensors(const OurParameters& parameters, bool bf16);

// The parameters of `file` for a GPT of `shape`, as fp32 in our orientation,
// in Gpt2ParameterShapes' order. Accepts GPT2LMHeadModel's names and
// GPT2Model's (no "transformer."), skips the attention mask buffers, and
// accepts lm_head.weight only when it equals wte (our head is tied).
// kFailedPrecondition naming `path` and the tensor: a parameter missing, an
// unknown tensor, a shape that is neither Conv1D's nor (for a non-square
// weight) nn.Linear's ("... is (out, in): nn.Linear's orientation; GPT-2
// files hold Conv1D's (in, out)"), a dtype other than F32/BF16/F16, an untied
// head.
absl::StatusOr<OurParameters> DecodeGpt2Safetensors(const SafetensorsFile& file,
                                                    const Gpt2Shape& shape,
                                                    const std::string& path);

}  // namespace mtb::hf

#endif  // MTB_COMMON_HF_GPT2_TENSORS_H_
