#include "trainer/checkpoint/resume_test_util.h"

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "common/base/sha256.h"
#include "common/collective/test_util.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/compare.h"
#include "trainer/strategy/ddp.h"
#include "trainer/strategy/fsdp.h"
#include "trainer/strategy/zero.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"
#include "trainer/config/config_names.h"

namespace mtb::checkpoint {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const std::string dir =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                   ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/", name);
  fs::remove_all(dir);
  return dir;
}

TrainConfig ResumeConfig(const std::string& strategy, int steps) {
  TrainConfig config = TinyConfig();
  config.set_strategy(*StrategyFromName(strategy));
  config.set_grad_sync(strategy == "zero2" || strategy == "fsdp" ? "every" : "last");
  config.set_dropout(0.1);
  config.set_lr_schedule(TrainConfig::cosine);
  config.set_lr(3e-3);
  config.set_min_lr(3e-4);
  config.set_lr_warmup_steps(2);
  config.set_lr_decay_steps(6);
  config.set_max_grad_norm(0.5);
  config.set_weight_decay(0.1);
  config.set_batch_size(2);
  config.set_steps(steps);
  return config;
}

std::unique_ptr<Strategy> MakeTestStrategy(const TrainConfig& config,
                                           collective::Communicator* communicator) {
  if (config.strategy() == TrainConfig::single) return std::make_unique<SingleStrategy>();
  if (config.strategy() == TrainConfig::ddp) {
    DdpOptions options = DdpOptionsFromConfig(config.bucket_cap_mb(), config.grad_sync());
    options.first_bucket_cap_bytes = 8 << 10;
    options.bucket_cap_bytes = 16 << 10;
    return std::make_unique<DdpStrategy>(communicator, options);
  }
  if (config.strategy() == TrainConfig::fsdp) {
    // A rank's shard of each unit spans parameters too; gathered per unit.
    return std::make_unique<FsdpStrategy>(communicator,
                                          FsdpOptionsFromConfig(true, false, config.grad_sync()));
  }
  // Several buckets: a rank's shard is a piece of each, spanning parameters.
  ZeroOptions options = ZeroOptionsFromConfig(config.strategy() == TrainConfig::zero1 ? 1 : 2,
                                              config.bucket_cap_mb(), config.grad_sync());
  options.first_bucket_cap_bytes = 8 << 10;
  options.bucket_cap_bytes = 16 << 10;
  return std::make_unique<ZeroStrategy>(communicator, options);
}

RunOutput Train(TrainConfig config, int world_size, const CheckpointOptions& options,
                const TrainOptions& train) {
  at::set_num_threads(1);
  RunOutput out;
  absl::StatusOr<CheckpointPlan> plan = PlanCheckpoints(
      options, &config, world_size,
      [&](absl::string_view flag) { return train.given.count(std::string(flag)) > 0; });
  if (!plan.ok()) {
    out.status = plan.status();
    if (train.rank_statuses != nullptr) {
      train.rank_statuses->assign(world_size, plan.status());
    }
    return out;
  }
  if (train.rank_statuses != nullptr) {
    train.rank_statuses->assign(world_size, absl::OkStatus());
  }
  if (train.notes != nullptr) *train.notes = plan->notes;
  const auto synthetic = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len()));
  const DataSource& data = train.data != nullptr ? *train.data : *synthetic;
  auto body = [&](collective::Communicator* communicator, int rank) {
    std::unique_ptr<Strategy> strategy = MakeTestStrategy(config, communicator);
    Checkpointer checkpointer(*plan, config, rank, world_size, communicator);
    if (train.setup) train.setup(checkpointer, rank);
    RunHooks hooks;
    hooks.checkpointer = &checkpointer;
    if (rank == 0) hooks.trace = train.trace;
    if (train.after_step) {
      hooks.after_step = [&train, rank](int64_t step) {
        train.after_step(step, rank);
        return absl::OkStatus();
      };
    }
    std::vector<at::Tensor> params;
    hooks.after_last_run = [&](const GptModel& model) {
      for (const NamedParameter& p : model.parameters())
        params.push_back(p.tensor.detach().clone());
      return absl::OkStatus();
    };
    absl::StatusOr<TrainResult> result =
        RunTraining(config, RankInfo{rank, world_size}, *strategy, data, hooks);
    if (train.after_run) train.after_run(communicator, rank);
    if (train.rank_statuses != nullptr) {
      (*train.rank_statuses)[rank] = result.status();
    } else if (rank != 0) {
      EXPECT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
    }
    if (rank != 0) return;
    out.status = result.status();
    if (result.ok()) out.result = *result;
    out.params = params;
  };
  if (world_size == 1 && config.strategy() == TrainConfig::single) {
    body(nullptr, 0);
  } else {
    const absl::Status threads = collective::RunRanksAsThreads(
        world_size, [&](collective::Communicator& c) { body(&c, c.rank()); });
    EXPECT_TRUE(threads.ok()) << threads;
  }
  return out;
}

RunOutput Train(TrainConfig config, int world_size, const CheckpointOptions& options,
                const std::set<std::string>& given, trace::TraceRecorder* trace,
                std::vector<std::string>* notes) {
  TrainOptions train;
  train.given = given;
  train.trace = trace;
  train.notes = notes;
  return Train(std::move(config), world_size, options, train);
}

std::vector<absl::Status> TrainAllowingFailure(TrainConfig config, int world_size,
                                               const CheckpointOptions& options,
                                               TrainOptions train, RunOutput* out) {
  std::vector<absl::Status> statuses;
  train.rank_statuses = &statuses;
  RunOutput output = Train(std::move(config), world_size, options, train);
  if (out != nullptr) *out = std::move(output);
  return statuses;
}

CheckpointOptions Saving(const std::string& dir, int save_every, const std::string& resume) {
  CheckpointOptions options;
  options.dir = dir;
  options.save_every = save_every;
  options.resume = resume;
  return options;
}

std::string FileBytes(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

std::map<std::string, std::string> HashTree(const std::string& dir) {
  std::map<std::string, std::string> tree;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      tree[fs::relative(entry.path(), dir).string()] = Sha256Hex(FileBytes(entry.path().string()));
    }
  }
  return tree;
}

void ExpectEqualCheckpoints(const std::string& left, const std::string& right) {
  absl::StatusOr<CheckpointComparison> comparison = Compare(left, right, 0);
  ASSERT_TRUE(comparison.ok()) << comparison.status();
  EXPECT_TRUE(comparison->equal()) << RenderComparison(*comparison);
  EXPECT_GT(comparison->tensors_compared(), 0);
  for (const PartDigest& part : comparison->parts()) EXPECT_TRUE(part.equal()) << part.part();
}

Batch RecordingData::Get(int64_t step, int64_t first_sample, int64_t count) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t i = 0; i < count; ++i) ++seen_[{step, first_sample + i}];
  }
  return data_->Get(step, first_sample, count);
}

std::map<std::pair<int64_t, int64_t>, int> RecordingData::Seen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seen_;
}

}  // namespace mtb::checkpoint
