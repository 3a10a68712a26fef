#include "trainer/pipeline/pipeline_config.h"

#include "gtest/gtest.h"

namespace mtb::pipeline {
namespace {

// A valid pipelined config: 4 layers, batch 12, 2 stages, 3 micro-batches.
TrainConfig Pipelined() {
  TrainConfig config;
  config.set_vocab_size(64);
  config.set_d_model(32);
  config.set_n_layers(4);
  config.set_seq_len(16);
  config.set_batch_size(12);
  config.set_grad_accum(1);
  config.set_repeat(1);
  config.set_precision(TrainConfig::fp32);
  config.set_pp(2);
  config.set_pp_schedule("1f1b");
  config.set_pp_microbatches(3);
  return config;
}

void ExpectRefused(const TrainConfig& config, const std::string& message) {
  const absl::Status status = ValidatePipelineConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
  EXPECT_NE(status.message().find(message), std::string::npos) << status;
}

TEST(PipelineConfig, ValidConfigGivesItsOptions) {
  ASSERT_TRUE(ValidatePipelineConfig(Pipelined()).ok());
  const PipelineOptions options = PipelineOptionsOf(Pipelined()).value();
  EXPECT_EQ(options.stages, 2);
  EXPECT_EQ(options.micro_batches, 3);
  EXPECT_EQ(options.schedule, ScheduleKind::kOneForwardOneBackward);
  ASSERT_EQ(options.partition.size(), 2u);
  EXPECT_EQ(options.partition[1].end_block, 4);
  EXPECT_TRUE(ValidatePipelineConfig(TrainConfig()).ok()) << "not pipelined";
}

TEST(PipelineConfig, BadInputIsRefusedNamingTheFlag) {
  TrainConfig config = Pipelined();
  config.set_pp(5);
  ExpectRefused(config, "--pp=5 must be between 1 and --n_layers=4");
  config = Pipelined();
  config.set_pp_microbatches(5);
  ExpectRefused(config, "--pp_microbatches=5 must divide --batch_size=12");
  config = Pipelined();
  config.set_pp_split("2,1");
  ExpectRefused(config, "--pp_split=2,1 has 2 stage(s) summing to 3 blocks");
  config = Pipelined();
  config.set_pp_split("1,1,2");
  ExpectRefused(config, "--pp_split=1,1,2 has 3 stage(s)");
  config = Pipelined();
  config.set_pp_schedule("zb");
  ExpectRefused(config, "--pp_schedule=zb is not one of gpipe, 1f1b");
  config = Pipelined();
  config.set_tp(2);
  EXPECT_TRUE(ValidatePipelineConfig(config).ok()) << "pp x tp composes";
  config = Pipelined();
  config.set_grad_accum(2);
  ExpectRefused(config, "--grad_accum=2 with --pp=2");
  config = Pipelined();
  config.set_precision(TrainConfig::bf16);
  ExpectRefused(config, "--precision=bf16 is not supported with --pp=2");
  config = Pipelined();
  config.set_activation_checkpointing(true);
  ExpectRefused(config, "--activation_checkpointing is not supported");
  config = Pipelined();
  config.set_reduction(TrainConfig::exact);
  ExpectRefused(config, "--reduction=exact is not supported");
  config = Pipelined();
  config.set_strategy(TrainConfig::fsdp);
  ExpectRefused(config,
                "--strategy=fsdp is not supported with --pp=2: a stage's "
                "forward and backward hold its blocks whole");
  for (const TrainConfig::Strategy strategy :
       {TrainConfig::ddp, TrainConfig::zero1, TrainConfig::zero2}) {
    config.set_strategy(strategy);
    EXPECT_TRUE(ValidatePipelineConfig(config).ok())
        << TrainConfig::Strategy_Name(strategy);
  }
  config = TrainConfig();
  config.set_pp_split("2,2");
  ExpectRefused(config, "--pp_split=2,2 applies to pipelined runs only");
}

TEST(PipelineConfig, StagesMustDivideTheWorldSize) {
  EXPECT_TRUE(ValidatePipelineWorldSize(Pipelined(), 2).ok());
  EXPECT_TRUE(ValidatePipelineWorldSize(Pipelined(), 4).ok()) << "pp 2 x dp 2";
  const absl::Status status = ValidatePipelineWorldSize(Pipelined(), 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--pp=2 must divide the world size 3"),
            std::string::npos)
      << status;
  EXPECT_TRUE(ValidatePipelineWorldSize(TrainConfig(), 3).ok());
  // pp x dp x tp: the world holds whole (pp, tp) meshes.
  TrainConfig with_tp = Pipelined();
  with_tp.set_tp(2);
  EXPECT_TRUE(ValidatePipelineWorldSize(with_tp, 4).ok()) << "pp 2 x tp 2";
  EXPECT_TRUE(ValidatePipelineWorldSize(with_tp, 8).ok()) << "x dp 2";
  const absl::Status six = ValidatePipelineWorldSize(with_tp, 6);
  EXPECT_NE(six.message().find("--pp=2 x --tp=2 must divide the world size 6 "
                               "(world = pp x dp x tp): use --nproc=4"),
            std::string::npos)
      << six;
}

}  // namespace
}  // namespace mtb::pipeline
