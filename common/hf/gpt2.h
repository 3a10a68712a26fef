// Our GPT in Hugging Face's GPT-2 terms: parameter names, the Conv1D
// orientation and config.json (docs/checkpoint.md, "Export" and "Import").
//
// Our model holds every projection as nn.Linear does, (out, in); HF GPT-2's
// c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj are Conv1D modules holding
// (in, out). Everything else (embeddings, LayerNorms, biases) is the same
// tensor under a prefixed name. The LM head is tied to wte in both.
#ifndef MTB_COMMON_HF_GPT2_H_
#define MTB_COMMON_HF_GPT2_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/hf/gpt2_config.pb.h"

namespace mtb::hf {

// What config.json says our model is made of.
struct Gpt2Shape {
  int vocab_size = 0;
  int n_positions = 0;  // our seq_len: the rows of wpe
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
};

// Constants our model hard-codes (trainer's model and common/nn).
inline constexpr double kLayerNormEpsilon = 1e-5;
inline constexpr char kActivation[] = "gelu";  // transformers' exact erf GELU

// HF GPT2LMHeadModel's state-dict name of our parameter `ours`: "wte" ->
// "transformer.wte.weight", "h.0.attn.c_attn.weight" ->
// "transformer.h.0.attn.c_attn.weight", "ln_f.bias" -> "transformer.ln_f.bias".
std::string Gpt2Name(absl::string_view ours);

// The inverse, for names with or without "transformer." (GPT2LMHeadModel's
// and GPT2Model's files); nullopt for a name that is not one of our
// parameters.
std::optional<std::string> OurName(absl::string_view gpt2_name);

// Whether HF stores our parameter `ours` as a Conv1D weight, (in, out).
bool IsConv1DWeight(absl::string_view ours);

// GPT-2 files also carry buffers that are not parameters: each layer's
// causal mask "h.N.attn.bias" and "h.N.attn.masked_bias". Import skips them.
bool IsGpt2Buffer(absl::string_view gpt2_name);

// config.json for `shape` with our constants; `torch_dtype` "float32" or
// "bfloat16".
Gpt2Config MakeGpt2Config(const Gpt2Shape& shape, const std::string& torch_dtype);

// `config` must describe a model our GPT computes exactly: the exact GELU,
// epsilon 1e-5, n_inner 4 * n_embd, a tied head, scaled attention and none of
// GPT-2's optional attention variants. kFailedPrecondition naming every field
// that differs ("config.json: activation_function='gelu_new' (ours: gelu ...)").
absl::Status CheckGpt2Config(const Gpt2Config& config, const std::string& path);

// The shape fields of `config`.
Gpt2Shape ShapeOf(const Gpt2Config& config);

}  // namespace mtb::hf

#endif  // MTB_COMMON_HF_GPT2_H_
