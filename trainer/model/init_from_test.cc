// --init_from (trainer/model/init_from.h) over real strategies: a checkpoint is
// exported with `ckpt_tool export --format=safetensors`, read back with
// ReadInitFrom and written into single, ddp (2 rank threads) and fsdp (2
// rank threads, every tensor split over shards) through their checkpoint
// pieces; the model each then holds, exported again, is the first file byte
// for byte (fp32 and bf16). The first step trains the imported model (its
// loss is that model's on the step's batch). Config mismatches are refused
// naming the fields, before anything runs.
#include "trainer/model/init_from.h"

#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ckpt_tool/export_safetensors.h"
#include "common/base/status.h"
#include "common/collective/test_util.h"
#include "common/hf/gpt2_tensors.h"
#include "common/nn/layers.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/resume_test_util.h"
#include "trainer/data/data.h"
#include "trainer/model/model.h"
#include "trainer/run/trainer.h"

namespace mtb {
namespace {

using checkpoint::FileBytes;
using checkpoint::ResumeConfig;
using checkpoint::Saving;
using checkpoint::TestDir;

// A 3-step fsdp checkpoint of ResumeConfig exported to `dir` (`dtype`).
std::string ExportedModel(const std::string& dtype) {
  const std::string root = TestDir("ckpt_" + dtype);
  const checkpoint::RunOutput run = checkpoint::Train(ResumeConfig("fsdp", 3), 2, Saving(root, 3));
  EXPECT_TRUE(run.status.ok()) << run.status;
  const std::string dir = TestDir("hf_" + dtype);
  absl::StatusOr<std::vector<std::string>> names =
      ckpt_tool::ExportSafetensors(root + "/step_00000003", dir, {dtype});
  EXPECT_TRUE(names.ok()) << names.status();
  return dir;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> ShapesOf(const TrainConfig& config) {
  return hf::Gpt2ParameterShapes({config.vocab_size(), config.seq_len(), config.d_model(),
                                  config.n_layers(), config.n_heads()});
}

// Runs `body(communicator, rank)` on `world_size` rank threads (one rank of
// "single": this thread, no communicator).
void OnRanks(int world_size, const std::function<void(collective::Communicator*, int)>& body) {
  if (world_size == 1) {
    body(nullptr, 0);
    return;
  }
  const absl::Status threads = collective::RunRanksAsThreads(
      world_size, [&](collective::Communicator& c) { body(&c, c.rank()); });
  EXPECT_TRUE(threads.ok()) << threads;
}

// The model `config`'s strategy holds on `world_size` rank threads right
// after InitializeParameters wrote `parameters` into it, assembled from every
// rank's pieces.
hf::OurParameters HeldAfterInit(const TrainConfig& config, int world_size,
                                const hf::OurParameters& parameters) {
  std::map<std::string, at::Tensor> full;  // by our name, filled from pieces
  for (const auto& [name, shape] : ShapesOf(config)) {
    full[name] = at::full(shape, std::nanf(""), at::kFloat);
  }
  std::mutex mutex;
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len()));
  OnRanks(world_size, [&](collective::Communicator* communicator, int rank) {
    std::unique_ptr<Strategy> strategy = checkpoint::MakeTestStrategy(config, communicator);
    absl::StatusOr<std::unique_ptr<Trainer>> trainer =
        Trainer::Create(config, RankInfo{rank, world_size}, strategy.get(), data.get());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ASSERT_TRUE(InitializeParameters(parameters, *strategy).ok());
    const std::lock_guard<std::mutex> lock(mutex);
    for (const StatePiece& piece : strategy->CheckpointPiecesToSave()) {
      if (!absl::StartsWith(piece.name, "model/")) continue;
      full[piece.name.substr(6)]
          .view({-1})
          .slice(0, piece.offset, piece.offset + piece.values.numel())
          .copy_(piece.values);
    }
  });
  hf::OurParameters held;
  for (const auto& [name, shape] : ShapesOf(config)) held.emplace_back(name, full[name]);
  return held;
}

// The first step's loss of `config` on one rank, started from `parameters`
// through RunHooks::init_parameters (nullptr: the seeded initialisation).
double FirstLoss(const TrainConfig& config, const hf::OurParameters* parameters) {
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len()));
  std::unique_ptr<Strategy> strategy = checkpoint::MakeTestStrategy(config, nullptr);
  RunHooks hooks;
  hooks.init_parameters = parameters;
  absl::StatusOr<TrainResult> result = RunTraining(config, RankInfo{0, 1}, *strategy, *data, hooks);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->runs(0).steps(0).loss() : 0;
}

TEST(InitFrom, ExportImportExportIsByteIdenticalThroughEveryStrategysPieces) {
  at::set_num_threads(1);
  for (const std::string dtype : {"fp32", "bf16"}) {
    const std::string dir = ExportedModel(dtype);
    const std::string exported = FileBytes(dir + "/model.safetensors");
    for (const auto& [strategy, world_size] :
         std::vector<std::pair<std::string, int>>{{"single", 1}, {"ddp", 2}, {"fsdp", 2}}) {
      const TrainConfig config = ResumeConfig(strategy, 3);
      absl::StatusOr<hf::OurParameters> imported = ReadInitFrom(dir, config);
      ASSERT_TRUE(imported.ok()) << imported.status();
      const hf::OurParameters held = HeldAfterInit(config, world_size, *imported);
      absl::StatusOr<std::string> again = hf::EncodeGpt2Safetensors(held, dtype == "bf16");
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_TRUE(*again == exported) << dtype << " through " << strategy << " on " << world_size
                                      << " rank(s): the re-export differs";
    }
  }
}

TEST(InitFrom, TheFirstStepTrainsTheImportedModel) {
  at::set_num_threads(1);
  const std::string dir = ExportedModel("fp32");
  TrainConfig config = ResumeConfig("single", 3);
  config.set_dropout(0);  // the loss below is the model's, without masks
  absl::StatusOr<hf::OurParameters> imported = ReadInitFrom(dir, config);
  ASSERT_TRUE(imported.ok()) << imported.status();

  GptModel model(ModelShapeOf(config), config.seed() + 1);
  {
    const at::NoGradGuard no_grad;
    ASSERT_EQ(model.parameters().size(), imported->size());
    for (size_t i = 0; i < imported->size(); ++i) {
      ASSERT_EQ(model.parameters()[i].name, (*imported)[i].first);
      model.parameters()[i].tensor.copy_((*imported)[i].second);
    }
  }
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len()));
  const Batch batch = data->Get(1, 0, config.batch_size() * config.grad_accum());
  double expected = 0;
  {
    const at::NoGradGuard no_grad;
    expected = nn::CrossEntropy(model.Forward(batch.inputs, ForwardOptions{}), batch.targets)
                   .item<double>();
  }
  const double with_init = FirstLoss(config, &*imported);
  const double seeded = FirstLoss(config, nullptr);
  // The same fp32 forward on one thread; the trainer's mean may sum the
  // per-token losses in another order: a few ulps of the loss.
  EXPECT_NEAR(with_init, expected, 1e-6 * expected);
  EXPECT_GT(std::abs(seeded - expected), 1e-3) << "the seeded start is another model";
}

TEST(InitFrom, AConfigMismatchIsRefusedNamingEveryField) {
  const std::string dir = ExportedModel("fp32");
  TrainConfig config = ResumeConfig("single", 3);
  const int d_model = config.d_model();
  const int n_heads = config.n_heads();
  config.set_d_model(2 * d_model);
  config.set_n_heads(2 * n_heads);
  absl::StatusOr<hf::OurParameters> read = ReadInitFrom(dir, config);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(),
            absl::StrCat("--init_from=", dir, ": ", dir,
                         "/config.json: config.json differs "
                         "from this run: n_embd=",
                         d_model, " vs --d_model=", 2 * d_model, "; n_head=", n_heads,
                         " vs --n_heads=", 2 * n_heads, " (set the flags to the model's sizes)"));
}

TEST(InitFrom, GptTwosTanhGeluIsRefusedAndAFileWithoutConfigIsReadByShapes) {
  const std::string dir = ExportedModel("fp32");
  const TrainConfig config = ResumeConfig("single", 3);
  const std::string config_json = FileBytes(dir + "/config.json");
  ASSERT_TRUE(WriteFileAtomically(dir + "/config.json",
                                  absl::StrReplaceAll(config_json, {{"\"gelu\"", "\"gelu_new\""}}))
                  .ok());
  absl::StatusOr<hf::OurParameters> tanh = ReadInitFrom(dir, config);
  ASSERT_FALSE(tanh.ok());
  EXPECT_EQ(tanh.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(tanh.status().message(),
                                "activation_function='gelu_new' (ours: gelu, the exact erf GELU)"))
      << tanh.status();

  const std::string alone = TestDir("alone");
  ASSERT_TRUE(
      WriteFileAtomically(alone + "/m.safetensors", FileBytes(dir + "/model.safetensors")).ok());
  EXPECT_TRUE(ReadInitFrom(alone + "/m.safetensors", config).ok());
  absl::StatusOr<hf::OurParameters> no_config = ReadInitFrom(alone, config);
  ASSERT_FALSE(no_config.ok());
  EXPECT_TRUE(absl::StrContains(no_config.status().message(), "no config.json there"))
      << no_config.status();
  TrainConfig deeper = config;
  deeper.set_n_layers(config.n_layers() + 1);
  absl::StatusOr<hf::OurParameters> missing = ReadInitFrom(alone + "/m.safetensors", deeper);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(
      absl::StrContains(missing.status().message(),
                        absl::StrCat("transformer.h.", config.n_layers(), ".ln_1.weight: missing")))
      << missing.status();
}

}  // namespace
}  // namespace mtb
