#include "common/hf/gpt2.h"

#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace mtb::hf {
namespace {

constexpr absl::string_view kPrefix = "transformer.";

// Our per-layer parameter names after "h.N.".
constexpr absl::string_view kLayerParameters[] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

// "h.<digits>." -> the rest, else nullopt.
std::optional<absl::string_view> AfterLayer(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "h.")) return std::nullopt;
  const size_t dot = name.find('.');
  if (dot == 0 || dot == absl::string_view::npos) return std::nullopt;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return name.substr(dot + 1);
}

}  // namespace

std::string Gpt2Name(absl::string_view ours) {
  if (ours == "wte" || ours == "wpe") return absl::StrCat(kPrefix, ours, ".weight");
  return absl::StrCat(kPrefix, ours);
}

std::optional<std::string> OurName(absl::string_view gpt2_name) {
  absl::ConsumePrefix(&gpt2_name, kPrefix);
  if (gpt2_name == "wte.weight" || gpt2_name == "wpe.weight") {
    return std::string(gpt2_name.substr(0, 3));
  }
  if (gpt2_name == "ln_f.weight" || gpt2_name == "ln_f.bias") return std::string(gpt2_name);
  std::optional<absl::string_view> rest = AfterLayer(gpt2_name);
  if (!rest.has_value()) return std::nullopt;
  for (absl::string_view parameter : kLayerParameters) {
    if (*rest == parameter) return std::string(gpt2_name);
  }
  return std::nullopt;
}

bool IsConv1DWeight(absl::string_view ours) {
  std::optional<absl::string_view> rest = AfterLayer(ours);
  return rest.has_value() && (*rest == "attn.c_attn.weight" || *rest == "attn.c_proj.weight" ||
                              *rest == "mlp.c_fc.weight" || *rest == "mlp.c_proj.weight");
}

bool IsGpt2Buffer(absl::string_view gpt2_name) {
  absl::ConsumePrefix(&gpt2_name, kPrefix);
  std::optional<absl::string_view> rest = AfterLayer(gpt2_name);
  return rest.has_value() && (*rest == "attn.bias" || *rest == "attn.masked_bias");
}

Gpt2Config MakeGpt2Config(const Gpt2Shape& shape, const std::string& torch_dtype) {
  Gpt2Config config;
  config.add_architectures("GPT2LMHeadModel");
  config.set_model_type("gpt2");
  config.set_vocab_size(shape.vocab_size);
  config.set_n_positions(shape.n_positions);
  config.set_n_embd(shape.n_embd);
  config.set_n_layer(shape.n_layer);
  config.set_n_head(shape.n_head);
  config.set_n_inner(4 * shape.n_embd);
  config.set_activation_function(kActivation);
  config.set_layer_norm_epsilon(kLayerNormEpsilon);
  // An exported model is for inference or fine-tuning: no dropout by default.
  config.set_resid_pdrop(0);
  config.set_embd_pdrop(0);
  config.set_attn_pdrop(0);
  config.set_tie_word_embeddings(true);
  config.set_scale_attn_weights(true);
  config.set_scale_attn_by_inverse_layer_idx(false);
  config.set_reorder_and_upcast_attn(false);
  config.set_torch_dtype(torch_dtype);
  return config;
}

absl::Status CheckGpt2Config(const Gpt2Config& config, const std::string& path) {
  std::vector<std::string> differences;
  // GPT2Config's defaults for absent fields.
  const std::string activation =
      config.has_activation_function() ? config.activation_function() : "gelu_new";
  if (activation != kActivation) {
    differences.push_back(absl::StrCat("activation_function='", activation,
                                       "' (ours: ", kActivation, ", the exact erf GELU)"));
  }
  const double epsilon = config.has_layer_norm_epsilon() ? config.layer_norm_epsilon() : 1e-5;
  if (std::abs(epsilon - kLayerNormEpsilon) > 1e-12) {
    differences.push_back(absl::StrCat("layer_norm_epsilon=", epsilon, " (ours: 1e-05)"));
  }
  if (config.has_n_inner() && config.n_inner() != 0 && config.n_inner() != 4 * config.n_embd()) {
    differences.push_back(absl::StrCat("n_inner=", config.n_inner(),
                                       " (ours: 4 * n_embd = ", 4 * config.n_embd(), ")"));
  }
  if (config.has_tie_word_embeddings() && !config.tie_word_embeddings()) {
    differences.push_back("tie_word_embeddings=false (ours: the LM head is wte)");
  }
  if (config.has_scale_attn_weights() && !config.scale_attn_weights()) {
    differences.push_back("scale_attn_weights=false (ours: scores / sqrt(head_dim))");
  }
  if (config.scale_attn_by_inverse_layer_idx()) {
    differences.push_back("scale_attn_by_inverse_layer_idx=true (ours: false)");
  }
  if (config.reorder_and_upcast_attn()) {
    differences.push_back("reorder_and_upcast_attn=true (ours: false)");
  }
  if (!config.model_type().empty() && config.model_type() != "gpt2") {
    differences.push_back(absl::StrCat("model_type='", config.model_type(), "' (ours: gpt2)"));
  }
  if (config.n_head() < 1 || config.n_embd() < 1 || config.n_embd() % config.n_head() != 0) {
    differences.push_back(absl::StrCat("n_embd=", config.n_embd(),
                                       " is not a positive multiple "
                                       "of n_head=",
                                       config.n_head()));
  }
  if (differences.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(path, ": not a model our GPT computes: ", absl::StrJoin(differences, "; ")));
}

Gpt2Shape ShapeOf(const Gpt2Config& config) {
  return {config.vocab_size(), config.n_positions(), config.n_embd(), config.n_layer(),
          config.n_head()};
}

}  // namespace mtb::hf
