#include "common/hf/gpt2_tensors.h"

#include <set>

#include "ATen/ops/equal.h"
#include "ATen/ops/from_blob.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"

namespace mtb::hf {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

absl::StatusOr<at::ScalarType> TypeOf(const std::string& dtype) {
  if (dtype == "F32") return at::kFloat;
  if (dtype == "BF16") return at::kBFloat16;
  if (dtype == "F16") return at::kHalf;
  return absl::FailedPreconditionError(
      absl::StrCat("dtype ", dtype, " (expected F32, BF16 or F16)"));
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> Gpt2ParameterShapes(
    const Gpt2Shape& shape) {
  const int64_t v = shape.vocab_size, t = shape.n_positions, d = shape.n_embd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"wte", {v, d}},
                                                                      {"wpe", {t, d}}};
  for (int layer = 0; layer < shape.n_layer; ++layer) {
    const std::string h = absl::StrCat("h.", layer, ".");
    for (const auto& [name, dims] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"ln_1.weight", {d}},
             {"ln_1.bias", {d}},
             {"attn.c_attn.weight", {3 * d, d}},
             {"attn.c_attn.bias", {3 * d}},
             {"attn.c_proj.weight", {d, d}},
             {"attn.c_proj.bias", {d}},
             {"ln_2.weight", {d}},
             {"ln_2.bias", {d}},
             {"mlp.c_fc.weight", {4 * d, d}},
             {"mlp.c_fc.bias", {4 * d}},
             {"mlp.c_proj.weight", {d, 4 * d}},
             {"mlp.c_proj.bias", {d}}}) {
      shapes.emplace_back(h + name, dims);
    }
  }
  shapes.emplace_back("ln_f.weight", std::vector<int64_t>{d});
  shapes.emplace_back("ln_f.bias", std::vector<int64_t>{d});
  return shapes;
}

absl::StatusOr<std::string> EncodeGpt2Safetensors(const OurParameters& parameters, bool bf16) {
  std::vector<SafetensorsTensor> tensors;
  for (const auto& [ours, value] : parameters) {
    at::Tensor tensor = IsConv1DWeight(ours) ? value.t() : value;  // (out, in) -> (in, out)
    tensor = tensor.to(bf16 ? at::kBFloat16 : at::kFloat).contiguous();
    SafetensorsTensor written;
    written.name = Gpt2Name(ours);
    written.dtype = bf16 ? "BF16" : "F32";
    written.shape = tensor.sizes().vec();
    written.data.assign(static_cast<const char*>(tensor.data_ptr()), tensor.nbytes());
    tensors.push_back(std::move(written));
  }
  return EncodeSafetensors(tensors, {{"format", "pt"}});
}

absl::StatusOr<OurParameters> DecodeGpt2Safetensors(const SafetensorsFile& file,
                                                    const Gpt2Shape& shape,
                                                    const std::string& path) {
  auto refuse = [&path](const std::string& name, const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", name, ": ", why));
  };
  // The file's entries by our name (either naming convention).
  std::map<std::string, const SafetensorsFile::Entry*> by_ours;
  const SafetensorsFile::Entry* head = nullptr;
  for (const SafetensorsFile::Entry& entry : file.tensors) {
    if (IsGpt2Buffer(entry.name)) continue;
    if (entry.name == "lm_head.weight") {
      head = &entry;
      continue;
    }
    std::optional<std::string> ours = OurName(entry.name);
    if (!ours.has_value()) {
      return refuse(entry.name, "not a parameter of a GPT-2 model (an unknown tensor)");
    }
    if (!by_ours.emplace(*ours, &entry).second) {
      return refuse(entry.name, "present under both GPT2LMHeadModel's and GPT2Model's name");
    }
  }
  auto to_fp32 = [&](const SafetensorsFile::Entry& entry) -> absl::StatusOr<at::Tensor> {
    absl::StatusOr<at::ScalarType> type = TypeOf(entry.dtype);
    if (!type.ok()) return refuse(entry.name, std::string(type.status().message()));
    const absl::string_view data = file.Data(entry);
    // from_blob needs writable memory; the clone owns its own.
    return at::from_blob(const_cast<char*>(data.data()), entry.shape,
                         at::TensorOptions().dtype(*type))
        .to(at::kFloat)
        .clone();
  };
  OurParameters parameters;
  for (const auto& [ours, expected] : Gpt2ParameterShapes(shape)) {
    auto found = by_ours.find(ours);
    if (found == by_ours.end()) {
      return refuse(Gpt2Name(ours), "missing (every parameter of the model must be there)");
    }
    const SafetensorsFile::Entry& entry = *found->second;
    std::vector<int64_t> in_file = expected;
    const bool conv1d = IsConv1DWeight(ours);
    if (conv1d) std::swap(in_file[0], in_file[1]);
    if (entry.shape != in_file) {
      if (conv1d && entry.shape == expected) {
        return refuse(entry.name, absl::StrCat("is ", ShapeText(entry.shape),
                                               " = (out, in): nn.Linear's orientation; GPT-2 "
                                               "files hold Conv1D's (in, out) ",
                                               ShapeText(in_file)));
      }
      return refuse(entry.name,
                    absl::StrCat("shape ", ShapeText(entry.shape), ", expected ",
                                 ShapeText(in_file), conv1d ? " (Conv1D's (in, out))" : ""));
    }
    ASSIGN_OR_RETURN(at::Tensor tensor, to_fp32(entry));
    if (conv1d) tensor = tensor.t().contiguous();  // (in, out) -> (out, in)
    parameters.emplace_back(ours, std::move(tensor));
    by_ours.erase(found);
  }
  if (!by_ours.empty()) {
    // A deeper model than the configuration (h.N beyond n_layer).
    return refuse(by_ours.begin()->second->name,
                  absl::StrCat("not a parameter of a ", shape.n_layer, "-layer model"));
  }
  if (head != nullptr) {
    ASSIGN_OR_RETURN(const at::Tensor lm_head, to_fp32(*head));
    if (!at::equal(lm_head, parameters.front().second)) {
      return refuse("lm_head.weight", "differs from wte: our LM head is tied to wte");
    }
  }
  return parameters;
}

}  // namespace mtb::hf
