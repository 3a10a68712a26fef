// trainer_cuda's checkpoints on a CPU, with a stand-in device model that keeps
// a real training state (parameters, two moments) its steps depend on: a run
// saved after step 3 and resumed from `latest` equals the continuous run bit
// for bit; the checkpoint verifies and holds the CPU trainer's logical
// tensors (one rank, single); a device model that drops the loaded state is
// caught (the negative case).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/cuda/checkpoint_state.h"
#include "trainer/cuda/layout.h"
#include "trainer/cuda/ranks_test_util.h"
#include "trainer/cuda/run.h"
#include "trainer/data/samples.h"
#include "trainer/model/model_shape.h"

namespace mtb {
namespace cuda {
namespace {

TrainConfig TinyConfig(int64_t steps) {
  TrainConfig config;
  config.set_vocab_size(64);
  config.set_d_model(32);
  config.set_n_layers(2);
  config.set_n_heads(4);
  config.set_seq_len(8);
  config.set_batch_size(3);
  config.set_precision(TrainConfig::fp32);
  config.set_strategy(TrainConfig::single);
  config.set_data("synthetic");
  config.set_lr(1e-3);
  config.set_min_lr(1e-4);
  config.set_lr_schedule(TrainConfig::cosine);
  config.set_lr_warmup_steps(2);
  config.set_lr_decay_steps(6);
  config.set_grad_accum(1);
  config.set_max_grad_norm(1.0);
  config.set_steps(steps);
  config.set_timing_warmup_steps(0);
  config.set_seed(77);
  config.set_beta1(0.9);
  config.set_beta2(0.999);
  config.set_eps(1e-8);
  return config;
}

// An AdamW-like update on the whole state from a gradient made of the step's
// tokens: each step's grad_norm depends on the whole history.
class StatefulStandIn : public GptCuda {
 public:
  StatefulStandIn(const float* initial, int64_t total, int64_t rows, bool drop_loaded_state)
      : parameters_(initial, initial + total), m_(total), v_(total), g_(total), rows_(rows),
        drop_loaded_state_(drop_loaded_state) {}
  // The gradient and the loss: means over the rows of small integers made of
  // their tokens (exact over a power-of-two row count, so the average of two
  // ranks' halves equals one rank's whole batch bit for bit). The history is
  // in the state: AdamW-like moments and parameters, and the grad_norm
  // reported (the parameters' sum of squares plus the step).
  StepStats ForwardBackward(const int32_t* inputs, const int32_t*) override {
    const size_t rows = static_cast<size_t>(rows_);
    for (size_t i = 0; i < parameters_.size(); ++i) {
      float sum = 0;
      for (size_t r = 0; r < rows; ++r) sum += static_cast<float>((inputs[r] + i) % 4);
      g_[i] = sum / static_cast<float>(rows);
    }
    StepStats stats;
    double loss = 0;
    for (size_t r = 0; r < rows; ++r) loss += inputs[r] % 8;
    stats.loss = loss / static_cast<double>(rows);
    return stats;
  }
  float* gradients() override { return g_.data(); }
  void Update(int64_t step, double lr, double, StepStats* stats) override {
    for (size_t i = 0; i < parameters_.size(); ++i) {
      m_[i] = 0.9f * m_[i] + 0.1f * g_[i];
      v_[i] = 0.999f * v_[i] + 0.001f * g_[i] * g_[i];
      parameters_[i] -= static_cast<float>(lr) * m_[i] / (std::sqrt(v_[i]) + 1e-8f);
    }
    double norm = 0;
    for (float p : parameters_) norm += p * p;
    stats->grad_norm = norm + static_cast<double>(step);
  }
  void CopyParametersToHost(float* host) override {
    std::memcpy(host, parameters_.data(), parameters_.size() * sizeof(float));
  }
  void CopyStateToHost(float* parameters, float* exp_avg, float* exp_avg_sq) override {
    const size_t bytes = parameters_.size() * sizeof(float);
    std::memcpy(parameters, parameters_.data(), bytes);
    std::memcpy(exp_avg, m_.data(), bytes);
    std::memcpy(exp_avg_sq, v_.data(), bytes);
  }
  void LoadState(const float* parameters, const float* exp_avg,
                 const float* exp_avg_sq) override {
    if (drop_loaded_state_) return;
    const size_t bytes = parameters_.size() * sizeof(float);
    std::memcpy(parameters_.data(), parameters, bytes);
    std::memcpy(m_.data(), exp_avg, bytes);
    std::memcpy(v_.data(), exp_avg_sq, bytes);
  }
  int64_t DeviceBytes() const override { return 0; }

  std::vector<float> parameters_, m_, v_, g_;

 private:
  int64_t rows_;
  bool drop_loaded_state_;
};

// Runs `config` with `plan`; the device model's final state goes to *last.
absl::StatusOr<TrainResult> RunStandIn(const TrainConfig& config,
                                       const checkpoint::CheckpointPlan& plan,
                                       std::vector<float>* last,
                                       bool drop_loaded_state = false) {
  const auto samples =
      MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len());
  return RunCudaTraining(
      config, *samples, DeviceInfo{"stand-in"},
      [&](const GptDims& dims, const ParameterLayout& layout, const float* parameters,
          std::string*) {
        auto model = std::make_unique<StatefulStandIn>(
            parameters, layout.total(), dims.batch_size * dims.seq_len, drop_loaded_state);
        struct Keep : GptCuda {
          std::unique_ptr<StatefulStandIn> inner;
          std::vector<float>* last;
          StepStats ForwardBackward(const int32_t* i, const int32_t* t) override {
            return inner->ForwardBackward(i, t);
          }
          float* gradients() override { return inner->gradients(); }
          void Update(int64_t s, double lr, double c, StepStats* stats) override {
            inner->Update(s, lr, c, stats);
            *last = inner->parameters_;
          }
          void CopyParametersToHost(float* h) override { inner->CopyParametersToHost(h); }
          void CopyStateToHost(float* p, float* m, float* v) override {
            inner->CopyStateToHost(p, m, v);
          }
          void LoadState(const float* p, const float* m, const float* v) override {
            inner->LoadState(p, m, v);
          }
          int64_t DeviceBytes() const override { return 0; }
        };
        auto keep = std::make_unique<Keep>();
        keep->inner = std::move(model);
        keep->last = last;
        return std::unique_ptr<GptCuda>(std::move(keep));
      },
      plan);
}

std::vector<double> Losses(const TrainResult& result) {
  std::vector<double> losses;
  for (const StepRecord& step : result.runs(0).steps()) losses.push_back(step.loss());
  return losses;
}

std::vector<double> GradNorms(const TrainResult& result) {
  std::vector<double> norms;
  for (const StepRecord& step : result.runs(0).steps()) norms.push_back(step.grad_norm());
  return norms;
}

class CudaCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(CreateDirectories(dir_).ok());
    TrainConfig whole = TinyConfig(6);
    absl::StatusOr<TrainResult> continuous =
        RunStandIn(whole, checkpoint::CheckpointPlan(), &whole_last_);
    ASSERT_TRUE(continuous.ok()) << continuous.status();
    whole_losses_ = Losses(*continuous);
    whole_norms_ = GradNorms(*continuous);
    TrainConfig first = TinyConfig(3);
    absl::StatusOr<TrainResult> saved =
        RunStandIn(first, CheckpointPlanFor(dir_, 3, "", 1, &first), &first_last_);
    ASSERT_TRUE(saved.ok()) << saved.status();
    ASSERT_EQ(saved->checkpoint().saves_size(), 1);
    EXPECT_EQ(saved->checkpoint().saves(0).step(), 3);
  }
  std::string dir_;
  std::vector<float> whole_last_, first_last_;
  std::vector<double> whole_losses_, whole_norms_;
};

TEST_F(CudaCheckpointTest, SaveThenResumeEqualsTheContinuousRunBitForBit) {
  TrainConfig rest = TinyConfig(6);
  const checkpoint::CheckpointPlan plan = CheckpointPlanFor(dir_, 0, "latest", 1, &rest);
  ASSERT_TRUE(plan.resuming());
  EXPECT_EQ(plan.start_step, 3);
  EXPECT_TRUE(plan.resume_exact);
  std::vector<float> last;
  absl::StatusOr<TrainResult> resumed = RunStandIn(rest, plan, &last);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->checkpoint().resumed_step(), 3);
  ASSERT_EQ(resumed->runs(0).steps_size(), 3);
  EXPECT_EQ(resumed->runs(0).steps(0).step(), 4);
  const std::vector<double> tail(whole_losses_.begin() + 3, whole_losses_.end());
  EXPECT_EQ(Losses(*resumed), tail);
  EXPECT_EQ(GradNorms(*resumed),
            std::vector<double>(whole_norms_.begin() + 3, whole_norms_.end()));
  ASSERT_EQ(last.size(), whole_last_.size());
  EXPECT_EQ(std::memcmp(last.data(), whole_last_.data(), last.size() * sizeof(float)), 0);
}

TEST_F(CudaCheckpointTest, TheCheckpointVerifiesWithTheCpuTrainersTensors) {
  const std::string step3 = dir_ + "/" + checkpoint::StepDirName(3);
  EXPECT_TRUE(checkpoint::Verify(step3).ok()) << checkpoint::Verify(step3);
  absl::StatusOr<checkpoint::CheckpointManifest> manifest = checkpoint::ReadManifest(step3);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->strategy(), "single");
  EXPECT_EQ(manifest->world_size(), 1);
  const TrainConfig config = TinyConfig(3);
  const ParameterLayout layout = ParameterLayout::ForGpt(ModelShapeOf(config));
  // model/, exp_avg/, exp_avg_sq/ per tensor and optimizer/step.
  ASSERT_EQ(manifest->tensors_size(), 3 * static_cast<int>(layout.tensors().size()) + 1);
  std::vector<std::string> names;
  for (const auto& tensor : manifest->tensors()) names.push_back(tensor.name());
  for (const std::string& want :
       {std::string("model/wte"), std::string("optimizer/exp_avg/h.1.mlp.c_fc.weight"),
        std::string("optimizer/exp_avg_sq/ln_f.bias"), std::string("optimizer/step")}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  // The saved parameters are the device's after step 3.
  HostState state(layout.total());
  ASSERT_TRUE(checkpoint::ReadTensorRanges(step3, *manifest, RequestsInto(layout, &state)).ok());
  EXPECT_EQ(state.step, 3);
  EXPECT_EQ(state.parameters, first_last_);
}

TEST_F(CudaCheckpointTest, ADeviceModelThatDropsTheLoadedStateDiffers) {
  TrainConfig rest = TinyConfig(6);
  const checkpoint::CheckpointPlan plan = CheckpointPlanFor(dir_, 0, "latest", 1, &rest);
  std::vector<float> last;
  absl::StatusOr<TrainResult> resumed =
      RunStandIn(rest, plan, &last, /*drop_loaded_state=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_NE(GradNorms(*resumed),
            std::vector<double>(whole_norms_.begin() + 3, whole_norms_.end()));
  EXPECT_NE(last, whole_last_);
}

// DDP's all-reduce on host buffers between rank threads (the NCCL one,
// nccl_collectives.h, runs on device buffers).
class ThreadCollectives : public SyncCollectives {
 public:
  ThreadCollectives(ThreadAverage* all, int rank) : all_(all), rank_(rank) {}
  int rank() const override { return rank_; }
  absl::Status AllReduceAverage(float* data, int64_t numel) override {
    ++all_reduces;
    all_->Average(rank_, data, numel);
    return absl::OkStatus();
  }
  absl::Status ReduceScatterAverage(const float*, float*, const std::vector<int64_t>&) override {
    return absl::UnimplementedError("ddp only");
  }
  absl::Status AllGatherInPlace(float*, const std::vector<int64_t>&) override {
    return absl::UnimplementedError("ddp only");
  }
  int all_reduces = 0;

 private:
  ThreadAverage* all_;
  int rank_;
};

// Two ranks (ddp, B = 2 each) with the gradient averaged between the phases
// equal one rank with B = 4 bit for bit: the data split, the buckets' sync
// and the loss average; without the sync (the negative case) they differ.
TEST(CudaRanks, TwoRanksAveragingTheirGradientsEqualOneRankBitForBit) {
  TrainConfig one = TinyConfig(4);
  one.set_batch_size(4);
  std::vector<float> one_last;
  absl::StatusOr<TrainResult> single = RunStandIn(one, checkpoint::CheckpointPlan(), &one_last);
  ASSERT_TRUE(single.ok()) << single.status();

  for (const bool sync : {true, false}) {
    TrainConfig two = one;
    two.set_batch_size(2);
    two.set_strategy(TrainConfig::ddp);
    ThreadAverage gradients(2), losses(2), alone(1);
    std::vector<absl::StatusOr<TrainResult>> results(2, absl::UnknownError("not run"));
    std::vector<int> all_reduces(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        // Without the sync each rank averages with itself only.
        ThreadCollectives mine(sync ? &gradients : &alone, sync ? r : 0);
        CudaRanks ranks;
        ranks.rank = r;
        ranks.world_size = 2;
        ranks.collectives = &mine;
        ranks.average_loss = [&, r](double loss) { return losses.Average(r, loss); };
        const auto samples =
            MakeSyntheticSamples(two.seed(), two.vocab_size(), two.seq_len());
        results[r] = RunCudaTraining(
            two, *samples, DeviceInfo{"stand-in"},
            [&](const GptDims& dims, const ParameterLayout& layout, const float* parameters,
                std::string*) {
              auto model = std::make_unique<StatefulStandIn>(
                  parameters, layout.total(), dims.batch_size * dims.seq_len, false);
              return std::unique_ptr<GptCuda>(std::move(model));
            },
            checkpoint::CheckpointPlan(), ranks);
        all_reduces[r] = mine.all_reduces;
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << results[r].status();
    if (sync) {
      EXPECT_GE(all_reduces[0], 4);  // a bucket or more a step
      EXPECT_EQ(all_reduces[0], all_reduces[1]);
      EXPECT_EQ(Losses(*results[0]), Losses(*single));
      EXPECT_EQ(Losses(*results[1]), Losses(*single));
      EXPECT_EQ(GradNorms(*results[0]), GradNorms(*single));
      EXPECT_EQ(GradNorms(*results[1]), GradNorms(*single));
    } else {
      EXPECT_NE(GradNorms(*results[0]), GradNorms(*single));
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace mtb
