#include "ckpt_tool/export_safetensors.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "ATen/ops/from_blob.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/base/status.h"
#include "common/hf/gpt2.h"
#include "common/hf/gpt2_tensors.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/compare.h"
#include "trainer/train_result.pb.h"

namespace mtb::ckpt_tool {
namespace {

constexpr absl::string_view kModel = "model/";

absl::StatusOr<at::ScalarType> ScalarTypeOf(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "bfloat16") return at::kBFloat16;
  if (dtype == "float16") return at::kHalf;
  return absl::FailedPreconditionError(absl::StrCat("a model tensor of dtype ", dtype));
}

// Renames directory `from` to `to` unless `to` exists (rename(2) would
// replace an empty directory), then syncs their parent.
absl::Status RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) != 0) {
    const int error = errno;
    if (error == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(to,
                       " appeared while exporting: it is left alone and the export is "
                       "discarded"));
    }
    return absl::InternalError(
        absl::StrCat("rename ", from, " to ", to, ": ", std::strerror(error)));
  }
  const int parent = ::open(DirectoryOf(to).c_str(), O_RDONLY | O_DIRECTORY);
  if (parent >= 0) {
    ::fsync(parent);
    ::close(parent);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExportSafetensors(const std::string& dir,
                                                           const std::string& out,
                                                           const ExportOptions& options) {
  if (options.dtype != "fp32" && options.dtype != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype=", options.dtype, ": expected fp32 or bf16"));
  }
  if (PathExists(out)) {
    return absl::AlreadyExistsError(absl::StrCat(out, " exists: refusing to overwrite it"));
  }
  RETURN_IF_ERROR(checkpoint::Verify(dir));
  ASSIGN_OR_RETURN(const checkpoint::CheckpointManifest manifest, checkpoint::ReadManifest(dir));
  TrainConfig config;
  if (manifest.config_json().empty() ||
      !FromJsonIgnoringUnknownFields(manifest.config_json(), &config).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": the manifest carries no readable configuration (n_head is not in the tensors)"));
  }
  const bool bf16 = options.dtype == "bf16";
  const hf::Gpt2Shape shape = {config.vocab_size(), config.seq_len(), config.d_model(),
                               config.n_layers(), config.n_heads()};
  std::map<std::string, const checkpoint::TensorEntry*> entries;  // by our name
  for (const checkpoint::TensorEntry& entry : manifest.tensors()) {
    if (absl::StartsWith(entry.name(), kModel)) {
      entries[entry.name().substr(kModel.size())] = &entry;
    }
  }
  // GPT-2's order (not the manifest's, which follows a strategy's layout):
  // the same model gives the same file whoever saved it, and import writes
  // it back in this order.
  hf::OurParameters parameters;
  std::vector<std::string> names;
  for (const auto& [ours, expected] : hf::Gpt2ParameterShapes(shape)) {
    auto found = entries.find(ours);
    if (found == entries.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, ": model/", ours, " is missing: not a checkpoint of our GPT"));
    }
    const checkpoint::TensorEntry& entry = *found->second;
    const std::vector<int64_t> global(entry.global_shape().begin(), entry.global_shape().end());
    if (global != expected) {
      return absl::FailedPreconditionError(absl::StrCat(dir, ": model/", ours, " has shape [",
                                                        absl::StrJoin(global, ","),
                                                        "], the "
                                                        "configuration says [",
                                                        absl::StrJoin(expected, ","), "]"));
    }
    ASSIGN_OR_RETURN(const at::ScalarType type, ScalarTypeOf(entry.dtype()));
    ASSIGN_OR_RETURN(std::string bytes, checkpoint::ReadGlobalTensor(dir, manifest, entry));
    // A copy that owns its storage (`bytes` goes out of scope).
    parameters.emplace_back(
        ours, at::from_blob(bytes.data(), global, at::TensorOptions().dtype(type)).clone());
    names.push_back(hf::Gpt2Name(ours));
    entries.erase(found);
  }
  if (!entries.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": model/", entries.begin()->first, " is not a parameter of our GPT"));
  }
  ASSIGN_OR_RETURN(const std::string file, hf::EncodeGpt2Safetensors(parameters, bf16));
  const hf::Gpt2Config gpt2 =
      hf::MakeGpt2Config({config.vocab_size(), config.seq_len(), config.d_model(),
                          config.n_layers(), config.n_heads()},
                         bf16 ? "bfloat16" : "float32");

  const std::string staging = absl::StrCat(out, ".partial.", ::getpid());
  RETURN_IF_ERROR(CreateDirectories(staging));
  absl::Status written = WriteFileAtomically(staging + "/model.safetensors", file);
  if (written.ok()) written = WriteJsonFile(gpt2, staging + "/config.json");
  if (written.ok()) written = RenameNoReplace(staging, out);
  if (!written.ok()) {
    // Our own staging files only; `out` is never touched.
    ::unlink((staging + "/model.safetensors").c_str());
    ::unlink((staging + "/config.json").c_str());
    ::rmdir(staging.c_str());
    return written;
  }
  return names;
}

}  // namespace mtb::ckpt_tool
