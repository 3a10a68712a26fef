#include "trainer/memory_estimate.h"

#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "trainer/model.h"
#include "trainer/test_config.h"

namespace mtb {
namespace {

ModelShape ShapeOf(const TrainConfig& c) {
  return ModelShape{c.vocab_size(), c.d_model(), c.n_layers(), c.n_heads(),
                    c.seq_len()};
}

TEST(MemoryEstimate, TheClosedFormParameterCountIsTheModels) {
  TrainConfig config = TinyConfig();
  for (const auto& [vocab, d_model, layers, seq] :
       {std::tuple<int, int, int, int>{64, 32, 2, 16}, {256, 48, 3, 8},
        {100, 16, 1, 40}}) {
    config.set_vocab_size(vocab);
    config.set_d_model(d_model);
    config.set_n_layers(layers);
    config.set_seq_len(seq);
    EXPECT_EQ(GptParameterCount(config),
              GptModel(ShapeOf(config), 1).ParameterCount())
        << vocab << " " << d_model << " " << layers << " " << seq;
  }
}

TEST(MemoryEstimate, StateIsFourCopiesOfTheParametersAndDdpAddsItsBuckets) {
  TrainConfig config = TinyConfig();  // single
  const int64_t p = GptParameterCount(config);
  MemoryEstimate single = EstimateRankMemory(config, 1);
  EXPECT_EQ(single.parameters(), 4 * p);
  EXPECT_EQ(single.gradients(), 4 * p);
  EXPECT_EQ(single.optimizer_state(), 8 * p);
  EXPECT_EQ(single.collective_staging(), 0);
  EXPECT_EQ(single.logits(), 3 * 4 * config.batch_size() * config.seq_len() *
                                 config.vocab_size());
  config.set_strategy("ddp");
  EXPECT_EQ(EstimateRankMemory(config, 2).collective_staging(), 4 * p);
  EXPECT_EQ(EstimateRankMemory(config, 2).total(), single.total() + 4 * p);
}

TEST(MemoryEstimate, ActivationsGrowWithTheBatchAndShrinkWithCheckpointing) {
  TrainConfig config = TinyConfig();
  config.set_n_layers(8);
  const int64_t full = EstimateRankMemory(config, 1).activations();
  config.set_batch_size(config.batch_size() * 2);
  EXPECT_EQ(EstimateRankMemory(config, 1).activations(), 2 * full);
  config.set_activation_checkpointing(true);
  EXPECT_LT(EstimateRankMemory(config, 1).activations(), full);
}

TEST(MemoryEstimate, ARunBeyondTheHostIsRefusedNamingTheEstimateAndTheFlags) {
  TrainConfig config = TinyConfig();
  config.set_vocab_size(65536);
  config.set_d_model(8192);
  config.set_n_layers(48);
  const HostMemory host{int64_t{24} << 30, int64_t{20} << 30, "MemTotal"};
  const absl::Status status =
      CheckMemoryFits(EstimateRankMemory(config, 2), 2, host, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const std::string message(status.message());
  EXPECT_EQ(message.rfind("the run cannot fit in memory: estimated ", 0), 0u)
      << message;
  EXPECT_NE(message.find(" per rank x 2 rank(s) on this host = "),
            std::string::npos);
  EXPECT_NE(message.find("exceeds this host's 24 GiB (MemTotal)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--batch_size"), std::string::npos);
  EXPECT_NE(message.find("--activation_checkpointing"), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
}

TEST(MemoryEstimate, ARunAboveWhatIsAvailableNowIsAWarningNotARefusal) {
  const MemoryEstimate estimate = EstimateRankMemory(TinyConfig(), 1);
  std::string warning;
  HostMemory roomy{estimate.total() * 10, estimate.total() * 10, "MemTotal"};
  ASSERT_TRUE(CheckMemoryFits(estimate, 4, roomy, &warning).ok());
  EXPECT_EQ(warning, "");
  HostMemory busy{estimate.total() * 10, estimate.total() * 2, "MemTotal"};
  ASSERT_TRUE(CheckMemoryFits(estimate, 4, busy, &warning).ok());
  EXPECT_NE(warning.find("available now (MemAvailable): the kernel may kill "
                         "ranks"),
            std::string::npos)
      << warning;
  HostMemory small{estimate.total() * 3, estimate.total() * 2, "cgroup memory.max"};
  EXPECT_FALSE(CheckMemoryFits(estimate, 4, small, &warning).ok());
}

TEST(MemoryEstimate, ThisHostsMemoryIsRead) {
  absl::StatusOr<HostMemory> host = ReadHostMemory();
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_GT(host->total_bytes, 0);
  EXPECT_GT(host->available_bytes, 0);
  EXPECT_LE(host->available_bytes, host->total_bytes);
}

}  // namespace
}  // namespace mtb
