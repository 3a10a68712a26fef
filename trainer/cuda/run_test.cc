// trainer_cuda's run loop on a CPU, with a stand-in for the device model: the
// data, schedule and initial parameters it hands the device, and the result.
#include "trainer/cuda/run.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/model/lr_schedule.h"
#include "trainer/model/model_shape.h"
#include "trainer/data/samples.h"

namespace mtb {
namespace cuda {
namespace {

TrainConfig TinyConfig() {
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
  config.set_lr_decay_steps(5);
  config.set_grad_accum(1);
  config.set_max_grad_norm(1.0);
  config.set_steps(5);
  config.set_timing_warmup_steps(1);
  config.set_seed(77);
  return config;
}

// Records what the loop hands the device; the loss falls by 0.5 a step.
struct Seen {
  std::vector<std::vector<int32_t>> inputs, targets;
  std::vector<double> lrs;
  std::vector<int64_t> steps;
  std::vector<float> initial;
  GptDims dims;
};

class StandIn : public GptCuda {
 public:
  StandIn(Seen* seen, double nan_at_step) : seen_(seen), nan_at_step_(nan_at_step) {}
  StepStats ForwardBackward(const int32_t* inputs, const int32_t* targets) override {
    const int64_t n = seen_->dims.batch_size * seen_->dims.seq_len;
    seen_->inputs.emplace_back(inputs, inputs + n);
    seen_->targets.emplace_back(targets, targets + n);
    const double step = static_cast<double>(seen_->inputs.size());  // 1-based
    StepStats stats;
    stats.loss = step == nan_at_step_ ? std::numeric_limits<double>::quiet_NaN()
                                      : 4.0 - 0.5 * step;
    return stats;
  }
  float* gradients() override { return nullptr; }
  void Update(int64_t step, double lr, double max_grad_norm, StepStats* stats) override {
    seen_->lrs.push_back(lr);
    seen_->steps.push_back(step);
    stats->grad_norm = 2.0;
    stats->clipped = stats->grad_norm > max_grad_norm;
  }
  void CopyParametersToHost(float*) override {}
  void CopyStateToHost(float*, float*, float*) override {}
  void LoadState(const float*, const float*, const float*) override {}
  int64_t DeviceBytes() const override { return 1234; }

 private:
  Seen* seen_;
  double nan_at_step_;
};

GptCudaFactory StandInFactory(Seen* seen, double nan_at_step = -1) {
  return [seen, nan_at_step](const GptDims& dims, const ParameterLayout& layout,
                             const float* parameters, std::string*) {
    seen->dims = dims;
    seen->initial.assign(parameters, parameters + layout.total());
    return std::unique_ptr<GptCuda>(std::make_unique<StandIn>(seen, nan_at_step));
  };
}

TEST(RunCudaTraining, HandsTheDeviceTheCpuTrainersDataScheduleAndInitialisation) {
  const TrainConfig config = TinyConfig();
  const auto samples = MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                            config.seq_len());
  Seen seen;
  absl::StatusOr<TrainResult> result =
      RunCudaTraining(config, *samples, DeviceInfo{"stand-in"}, StandInFactory(&seen));
  ASSERT_TRUE(result.ok()) << result.status();

  EXPECT_EQ(seen.dims.batch_size, 3);
  EXPECT_EQ(seen.dims.seq_len, 8);
  const ParameterLayout layout = ParameterLayout::ForGpt(ModelShapeOf(config));
  std::vector<float> expected(layout.total());
  InitializeParameters(layout, config.seed(), expected.data());
  ASSERT_EQ(seen.initial.size(), expected.size());
  EXPECT_EQ(std::memcmp(seen.initial.data(), expected.data(),
                        expected.size() * sizeof(float)),
            0);

  ASSERT_EQ(seen.steps, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  for (int64_t step = 0; step < 5; ++step) {
    std::vector<int64_t> tokens(3 * 9);
    samples->Fill(step, 0, 3, tokens.data());
    for (int64_t b = 0; b < 3; ++b) {
      for (int64_t t = 0; t < 8; ++t) {
        ASSERT_EQ(seen.inputs[step][b * 8 + t], tokens[b * 9 + t]) << step;
        ASSERT_EQ(seen.targets[step][b * 8 + t], tokens[b * 9 + t + 1]) << step;
      }
    }
    EXPECT_EQ(seen.lrs[step], LearningRateAt(LrScheduleOf(config), step + 1));
  }
  // Negative: consecutive steps are different batches.
  EXPECT_NE(seen.inputs[0], seen.inputs[1]);

  ASSERT_EQ(result->runs_size(), 1);
  const TrainRun& run = result->runs(0);
  ASSERT_EQ(run.steps_size(), 5);
  EXPECT_EQ(run.steps(0).step(), 1);  // 1-based, as the CPU trainer's
  EXPECT_EQ(run.steps(4).step(), 5);
  EXPECT_EQ(run.steps(0).loss(), 3.5);
  EXPECT_EQ(run.steps(4).loss(), 1.5);
  EXPECT_TRUE(run.steps(0).clipped());
  EXPECT_FALSE(run.steps(0).timed());
  EXPECT_TRUE(run.steps(1).timed());
  EXPECT_EQ(run.first_loss(), 3.5);
  EXPECT_EQ(run.final_loss(), 1.5);
  EXPECT_EQ(result->model().parameter_count(), layout.total());
  EXPECT_EQ(result->model().tokens_per_step(), 24);
  EXPECT_EQ(result->memory(0).peak_bytes(), 1234);
}

TEST(RunCudaTraining, NonFiniteLossStopsNamingTheStep) {
  const TrainConfig config = TinyConfig();
  const auto samples = MakeSyntheticSamples(1, 64, 8);
  Seen seen;
  absl::StatusOr<TrainResult> result = RunCudaTraining(
      config, *samples, DeviceInfo{"stand-in"}, StandInFactory(&seen, 3));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("step 3/5: the loss is nan"),
            std::string::npos)
      << result.status();
  EXPECT_EQ(seen.steps.size(), 3u);  // nothing after the failed step
}

TEST(RunCudaTraining, AModelThatCannotBeCreatedIsResourceExhausted) {
  const auto samples = MakeSyntheticSamples(1, 64, 8);
  absl::StatusOr<TrainResult> result = RunCudaTraining(
      TinyConfig(), *samples, DeviceInfo{"GPU 0"},
      [](const GptDims&, const ParameterLayout&, const float*, std::string* error) {
        *error = "cudaMalloc of 8 bytes: out of memory";
        return std::unique_ptr<GptCuda>();
      });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(result.status().message(),
            "creating the model on GPU 0: cudaMalloc of 8 bytes: out of memory");
}

// --precision=bf16 is accepted and reaches the device model as GptDims::bf16
// (fp32: false, the negative case).
TEST(RunCudaTraining, ThePrecisionReachesTheDeviceModel) {
  const auto samples = MakeSyntheticSamples(1, 64, 8);
  for (const auto precision : {TrainConfig::fp32, TrainConfig::bf16}) {
    TrainConfig config = TinyConfig();
    config.set_precision(precision);
    ASSERT_TRUE(CheckCudaConfig(config).ok());
    int asked = -1;
    const absl::StatusOr<TrainResult> result = RunCudaTraining(
        config, *samples, DeviceInfo{"GPU 0"},
        [&](const GptDims& dims, const ParameterLayout&, const float*, std::string* error) {
          asked = dims.bf16 ? 1 : 0;
          *error = "stop";
          return std::unique_ptr<GptCuda>();
        });
    EXPECT_FALSE(result.ok());
    EXPECT_EQ(asked, precision == TrainConfig::bf16 ? 1 : 0);
  }
}

TEST(CheckCudaConfig, RefusesWhatTheCudaPathDoesNotImplement) {
  EXPECT_TRUE(CheckCudaConfig(TinyConfig()).ok());  // the negative case
  struct Case {
    void (*change)(TrainConfig*);
    const char* message;
  };
  const Case cases[] = {
      {[](TrainConfig* c) { c->set_strategy(TrainConfig::zero2); }, "--strategy=zero2"},
      {[](TrainConfig* c) { c->set_dropout(0.1); }, "--dropout=0.1"},
      {[](TrainConfig* c) { c->set_grad_accum(2); }, "--grad_accum=2"},
      {[](TrainConfig* c) { c->set_repeat(2); }, "--repeat=2"},
      {[](TrainConfig* c) { c->set_reduction(TrainConfig::exact); }, "--reduction=exact"},
      {[](TrainConfig* c) { c->set_activation_checkpointing(true); },
       "--activation_checkpointing"},
  };
  for (const Case& c : cases) {
    TrainConfig config = TinyConfig();
    c.change(&config);
    const absl::Status status = CheckCudaConfig(config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status;
  }
}

TEST(CheckCudaConfig, SeveralGpusRunDdpOrZero1) {
  TrainConfig config = TinyConfig();
  for (const auto strategy : {TrainConfig::ddp, TrainConfig::zero1}) {
    config.set_strategy(strategy);
    EXPECT_TRUE(CheckCudaConfig(config, 2).ok());  // the negative case
    EXPECT_TRUE(CheckCudaConfig(config, 1).ok());  // NCCL at world size 1
  }
  for (const auto strategy : {TrainConfig::zero2, TrainConfig::fsdp, TrainConfig::single}) {
    config.set_strategy(strategy);
    const absl::Status status = CheckCudaConfig(config, 2);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << static_cast<int>(strategy);
    EXPECT_NE(status.message().find("on 2 GPUs (--strategy=single, ddp or zero1)"),
              std::string::npos)
        << status;
  }
}

}  // namespace
}  // namespace cuda
}  // namespace mtb
