// `ckpt_tool export --format=torch` round trip through Python: a checkpoint
// of fsdp on 2 rank threads (every tensor split over shards) is exported;
// Debian's /usr/bin/python3 (PyTorch 1.13) loads it with torch.load, checks
// the Hugging Face GPT-2 names, builds the GPT in plain PyTorch
// (trainer/testdata/reference_gpt.py) and gets logits on a fixed batch equal,
// bit for bit, to our model's with the checkpoint's parameters
// (testdata/export_check.py). Bit equality needs both processes on the same
// sgemm kernels (OPENBLAS_CORETYPE=Haswell, as //trainer:reference_test).
// A corrupt checkpoint is refused, writing nothing.
#include "ckpt_tool/export.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "ATen/core/Dict.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

TEST(Export, PythonLoadsTheStateDictAndItsGptGivesOurLogitsBitForBit) {
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
  const at::Tensor tokens = data->Get(7, 0, 3).inputs;
  at::Tensor logits;
  {
    const at::NoGradGuard no_grad;
    logits = model.Forward(tokens, ForwardOptions{});
  }
  c10::Dict<std::string, at::Tensor> batch;
  batch.insert("tokens", tokens.clone());
  batch.insert("logits", logits.clone());
  const std::vector<char> pickled = torch::jit::pickle_save(batch);
  const std::string out = TestDir("out");
  ASSERT_TRUE(
      WriteFileAtomically(out + "/batch.pt", std::string(pickled.begin(), pickled.end())).ok());

  absl::StatusOr<std::vector<std::string>> names =
      mtb::ckpt_tool::ExportTorch(dir, out + "/fp32.pt", {"fp32"});
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->size(), 4 + 12 * config.n_layers() + 1u) << "every parameter and lm_head";
  EXPECT_EQ(names->back(), "lm_head.weight");
  ASSERT_TRUE(mtb::ckpt_tool::ExportTorch(dir, out + "/bf16.pt", {"bf16"}).ok());

  const std::string command = absl::StrCat(
      kPython, " trainer/checkpoint/testdata/export_check.py trainer/testdata/reference_gpt.py ",
      out, "/fp32.pt ", out, "/bf16.pt ", out, "/batch.pt ", config.n_layers(), " ",
      config.n_heads());
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(Export, ACorruptCheckpointIsRefusedAndNothingIsWritten) {
  const std::string root = TestDir("ckpt");
  ASSERT_TRUE(Train(ResumeConfig("ddp", 3), 2, Saving(root, 3)).status.ok());
  const std::string shard = root + "/step_00000003/rank_00001.bin";
  std::string bytes = FileBytes(shard);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(shard, bytes).ok());
  const std::string out = TestDir("out.pt");
  absl::StatusOr<std::vector<std::string>> names =
      mtb::ckpt_tool::ExportTorch(root + "/step_00000003", out, {"fp32"});
  ASSERT_FALSE(names.ok());
  EXPECT_TRUE(absl::StrContains(names.status().message(), "rank_00001.bin: corrupt"))
      << names.status();
  EXPECT_FALSE(PathExists(out));
}

}  // namespace
}  // namespace mtb::checkpoint
