#include "ckpt_tool/export.h"

#include <string>
#include <vector>

#include "ATen/core/Dict.h"
#include "ATen/ops/from_blob.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/base/status.h"
#include "common/hf/gpt2.h"
#include "common/results/atomic_file.h"
#include "torch/csrc/jit/serialization/pickle.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/compare.h"

namespace mtb::ckpt_tool {
namespace {

constexpr absl::string_view kModel = "model/";

absl::StatusOr<at::ScalarType> ScalarTypeOf(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "bfloat16") return at::kBFloat16;
  if (dtype == "float16") return at::kHalf;
  return absl::FailedPreconditionError(absl::StrCat("a model tensor of dtype ", dtype));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExportTorch(const std::string& dir, const std::string& out,
                                                     const ExportOptions& options) {
  if (options.dtype != "fp32" && options.dtype != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype=", options.dtype, ": expected fp32 or bf16"));
  }
  RETURN_IF_ERROR(checkpoint::Verify(dir));
  ASSIGN_OR_RETURN(const checkpoint::CheckpointManifest manifest, checkpoint::ReadManifest(dir));
  c10::Dict<std::string, at::Tensor> state;
  std::vector<std::string> names;
  at::Tensor token_embedding;
  for (const checkpoint::TensorEntry& entry : manifest.tensors()) {
    if (!absl::StartsWith(entry.name(), kModel)) continue;
    ASSIGN_OR_RETURN(const at::ScalarType type, ScalarTypeOf(entry.dtype()));
    ASSIGN_OR_RETURN(std::string bytes, checkpoint::ReadGlobalTensor(dir, manifest, entry));
    const std::vector<int64_t> shape(entry.global_shape().begin(), entry.global_shape().end());
    // A copy that owns its storage (a view would pickle whatever it views).
    at::Tensor tensor = at::from_blob(bytes.data(), shape, at::TensorOptions().dtype(type)).clone();
    tensor = tensor.to(options.dtype == "bf16" ? at::kBFloat16 : at::kFloat);
    const std::string name = entry.name().substr(kModel.size());
    if (name == "wte") token_embedding = tensor;
    names.push_back(hf::Gpt2Name(name));
    state.insert(names.back(), tensor);
  }
  if (names.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": no model/ tensors to export"));
  }
  if (token_embedding.defined()) {
    // The LM head is tied to the token embedding; HF's state dict lists it.
    names.push_back("lm_head.weight");
    state.insert(names.back(), token_embedding.clone());
  }
  const std::vector<char> pickled = torch::jit::pickle_save(state);
  RETURN_IF_ERROR(WriteFileAtomically(out, absl::string_view(pickled.data(), pickled.size())));
  return names;
}

}  // namespace mtb::ckpt_tool
