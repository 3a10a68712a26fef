// `ckpt_tool export --format=safetensors` checked without transformers: a
// checkpoint of fsdp on 2 rank threads (every tensor split over shards) is
// exported; Debian's /usr/bin/python3 (PyTorch 1.13) reads model.safetensors
// with its own struct + json reader (testdata/safetensors_check.py), checks
// the format (little-endian length, aligned data, offsets tiling it), the
// Hugging Face names, Conv1D's (in, out) shapes and config.json, then runs a
// plain-torch GPT-2 forward with Conv1D semantics (x @ W + b) and the exact
// GELU that gets our model's logits and loss on the same batch within a
// derived fp32 bound, and bit for bit where the operations match (the
// weights transposed back through reference_gpt.py's nn.Linear forward).
// Refusals: an existing --out, a corrupt checkpoint (nothing written).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "ATen/core/Dict.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ckpt_tool/export_safetensors.h"
#include "common/nn/layers.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "torch/csrc/jit/serialization/pickle.h"
#include "common/gemm/backend.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/compare.h"
#include "trainer/checkpoint/resume_test_util.h"
#include "trainer/data/data.h"
#include "trainer/model/model.h"
#include "trainer/run/trainer.h"

namespace mtb::checkpoint {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

// Loads the parameters of checkpoint `dir` into `model` (made with another
// seed, so that every parameter must come from the checkpoint).
void LoadModel(const std::string& dir, GptModel& model) {
  absl::StatusOr<CheckpointManifest> manifest = ReadManifest(dir);
  CHECK(manifest.ok()) << manifest.status();
  const at::NoGradGuard no_grad;
  int loaded = 0;
  for (const NamedParameter& p : model.parameters()) {
    for (const TensorEntry& entry : manifest->tensors()) {
      if (entry.name() != "model/" + p.name) continue;
      absl::StatusOr<std::string> bytes = ReadGlobalTensor(dir, *manifest, entry);
      CHECK(bytes.ok()) << bytes.status();
      CHECK_EQ(bytes->size(), p.tensor.nbytes()) << p.name;
      std::memcpy(p.tensor.data_ptr(), bytes->data(), bytes->size());
      ++loaded;
    }
  }
  CHECK_EQ(loaded, static_cast<int>(model.parameters().size()));
}

TEST(SafetensorsExport, PythonReadsItAndItsConv1DGptGivesOurLogitsAndLoss) {
  at::set_num_threads(1);
  // PyTorch's fp32 products are the BLAS's: bit equality holds on that backend.
  const gemm::ScopedBackend blas(gemm::Backend::kBlas);
  const TrainConfig config = ResumeConfig("fsdp", 3);
  const std::string root = TestDir("ckpt");
  ASSERT_TRUE(Train(config, 2, Saving(root, 3)).status.ok());
  const std::string dir = root + "/step_00000003";

  GptModel model(ModelShapeOf(config), config.seed() + 1);
  LoadModel(dir, model);
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len()));
  const Batch batch = data->Get(7, 0, 3);
  at::Tensor logits, loss;
  {
    const at::NoGradGuard no_grad;
    logits = model.Forward(batch.inputs, ForwardOptions{});
    loss = nn::CrossEntropy(logits, batch.targets);
  }
  c10::Dict<std::string, at::Tensor> saved;
  saved.insert("tokens", batch.inputs.clone());
  saved.insert("targets", batch.targets.clone());
  saved.insert("logits", logits.clone());
  saved.insert("loss", loss.clone());
  const std::vector<char> pickled = torch::jit::pickle_save(saved);
  const std::string out = TestDir("out");
  ASSERT_TRUE(
      WriteFileAtomically(out + "/batch.pt", std::string(pickled.begin(), pickled.end())).ok());

  absl::StatusOr<std::vector<std::string>> names =
      mtb::ckpt_tool::ExportSafetensors(dir, out + "/fp32", {"fp32"});
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->size(), 4 + 12 * config.n_layers()) << "every parameter; lm_head is tied";
  ASSERT_TRUE(mtb::ckpt_tool::ExportSafetensors(dir, out + "/bf16", {"bf16"}).ok());
  // The same checkpoint exports to the same bytes.
  ASSERT_TRUE(mtb::ckpt_tool::ExportSafetensors(dir, out + "/again", {"fp32"}).ok());
  EXPECT_EQ(FileBytes(out + "/again/model.safetensors"),
            FileBytes(out + "/fp32/model.safetensors"));
  EXPECT_EQ(FileBytes(out + "/again/config.json"), FileBytes(out + "/fp32/config.json"));

  const std::string command = absl::StrCat(
      kPython,
      " trainer/checkpoint/testdata/safetensors_check.py trainer/testdata/reference_gpt.py ", out,
      "/fp32 ", out, "/bf16 ", out, "/batch.pt");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(SafetensorsExport, AnExistingOutIsAlreadyExistsAndLeftAlone) {
  const std::string root = TestDir("ckpt");
  ASSERT_TRUE(Train(ResumeConfig("ddp", 3), 2, Saving(root, 3)).status.ok());
  const std::string out = TestDir("existing");
  ASSERT_TRUE(WriteFileAtomically(out + "/keep.txt", "mine").ok());
  absl::StatusOr<std::vector<std::string>> names =
      mtb::ckpt_tool::ExportSafetensors(root + "/step_00000003", out, {"fp32"});
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(names.status().message(), "exists: refusing to overwrite it"))
      << names.status();
  EXPECT_EQ(FileBytes(out + "/keep.txt"), "mine");
  EXPECT_FALSE(PathExists(out + "/model.safetensors"));
}

TEST(SafetensorsExport, ACorruptCheckpointIsRefusedAndNothingIsWritten) {
  const std::string root = TestDir("ckpt");
  ASSERT_TRUE(Train(ResumeConfig("ddp", 3), 2, Saving(root, 3)).status.ok());
  const std::string shard = root + "/step_00000003/rank_00001.bin";
  std::string bytes = FileBytes(shard);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(shard, bytes).ok());
  const std::string out = TestDir("hf");
  absl::StatusOr<std::vector<std::string>> names =
      mtb::ckpt_tool::ExportSafetensors(root + "/step_00000003", out, {"fp32"});
  ASSERT_FALSE(names.ok());
  EXPECT_TRUE(absl::StrContains(names.status().message(), "rank_00001.bin: corrupt"))
      << names.status();
  EXPECT_FALSE(PathExists(out));
  absl::StatusOr<std::vector<std::string>> staging = ListDirectory(DirectoryOf(out), "hf.");
  ASSERT_TRUE(staging.ok());
  EXPECT_TRUE(staging->empty()) << "no staging directory left behind";
}

}  // namespace
}  // namespace mtb::checkpoint
