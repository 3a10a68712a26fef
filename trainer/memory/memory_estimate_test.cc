#include "trainer/memory/memory_estimate.h"

#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "trainer/model/model.h"
#include "trainer/tests/test_config.h"
#include "trainer/tp/layout.h"

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

// With --tp, a rank's state is its parts of the parameters (the layout in
// trainer/tp/layout.h), over the dp group's world_size / tp ranks.
TEST(MemoryEstimate, ATpRankHoldsItsPartsOfTheParameters) {
  TrainConfig config = TinyConfig();
  config.set_tp(2);
  int64_t local = 0;
  const GptModel model(ShapeOf(config), 1);
  for (const NamedParameter& p : model.parameters()) {
    int64_t numel = 1;
    for (int64_t size :
         tp::LocalShape(tp::SplitOf(p.name), p.tensor.sizes().vec(), 2)) {
      numel *= size;
    }
    local += numel;
  }
  const MemoryEstimate ddp = EstimateRankMemoryFor(config, 4, StrategyKind::kDdp);
  EXPECT_EQ(ddp.parameters(), 4 * local);
  EXPECT_EQ(ddp.optimizer_state(), 8 * local);
  // fsdp shards a rank's parts over its dp group of 2.
  const MemoryEstimate fsdp =
      EstimateRankMemoryFor(config, 4, StrategyKind::kFsdp);
  EXPECT_GE(fsdp.optimizer_state(), 8 * (local / 2));
  EXPECT_LE(fsdp.optimizer_state(), 8 * (local / 2 + 2 * 8));  // 8 units round up
  EXPECT_LT(ddp.parameters(), 4 * GptParameterCount(config));
}

// Activations per tp rank (docs/tp.md "Memory"): per block, the residual
// stream's LayerNorm inputs and outputs (4 BTd) whole, or T/tp positions
// with SP (plus the 2 BTd all-gathered LayerNorm outputs); q/k/v, the
// attention output and the MLP hidden (12 BTd) and the scores and softmax
// (2 BhT^2) over tp; the embeddings' sum and ln_f (2 BTd) beside.
TEST(MemoryEstimate, ActivationsAreATpRanksShare) {
  TrainConfig config = TinyConfig();
  const int64_t b = config.batch_size(), t = config.seq_len(),
                d = config.d_model(), h = config.n_heads(),
                l = config.n_layers();
  const int64_t btd = b * t * d, bhtt = b * h * t * t;
  const int64_t unsplit = EstimateRankMemory(config, 2).activations();
  EXPECT_EQ(unsplit, 4 * (l * (16 * btd + 2 * bhtt) + 2 * btd));
  config.set_tp(2);
  EXPECT_EQ(EstimateRankMemory(config, 2).activations(),
            4 * (l * (4 * btd + 12 * btd / 2 + 2 * bhtt / 2) + 2 * btd));
  config.set_sequence_parallel(true);
  EXPECT_EQ(EstimateRankMemory(config, 2).activations(),
            4 * (l * (4 * btd / 2 + 2 * btd + 12 * btd / 2 + 2 * bhtt / 2) +
                 2 * btd / 2));
  config.set_tp(4);
  EXPECT_EQ(EstimateRankMemory(config, 4).activations(),
            4 * (l * (4 * btd / 4 + 2 * btd + 12 * btd / 4 + 2 * bhtt / 4) +
                 2 * btd / 4));
  config.set_activation_checkpointing(true);
  EXPECT_EQ(EstimateRankMemory(config, 4).activations(),
            4 * (l * btd / 4 + 4 * btd / 4 + 2 * btd + 12 * btd / 4 +
                 2 * bhtt / 4 + 2 * btd / 4));
}

TEST(MemoryEstimate, StateIsFourCopiesOfTheParametersAndDdpReducesInPlace) {
  TrainConfig config = TinyConfig();
  const int64_t p = GptParameterCount(config);
  const MemoryEstimate single = EstimateRankMemory(config, 1);
  EXPECT_EQ(single.parameters(), 4 * p);
  EXPECT_EQ(single.gradients(), 4 * p);
  EXPECT_EQ(single.optimizer_state(), 8 * p);
  EXPECT_EQ(single.collective_staging(), 0);
  EXPECT_EQ(single.logits(), 3 * 4 * config.batch_size() * config.seq_len() *
                                 config.vocab_size());
  // ddp's buckets are views of the flat gradient buffer: no copy.
  config.set_strategy(TrainConfig::ddp);
  EXPECT_EQ(EstimateRankMemory(config, 2).collective_staging(), 0);
  EXPECT_EQ(EstimateRankMemory(config, 2).total(), single.total());
}

// The closed forms of memory_estimate.h: ddp 16P, zero1 8P + 8P/N, zero2
// 4P + 12P/N, each plus its bounded collective temporaries.
TEST(MemoryEstimate, ShardedStrategiesFollowTheZeroFormulas) {
  TrainConfig config = TinyConfig();
  config.set_bucket_cap_mb(0.001);  // 1048 bytes: below the model
  const int64_t p = GptParameterCount(config);
  const int64_t bucket = static_cast<int64_t>(0.001 * (1 << 20));
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    const int64_t shard = (p + n - 1) / n;
    const MemoryEstimate ddp =
        EstimateRankMemoryFor(config, n, StrategyKind::kDdp);
    config.set_grad_sync("last");
    const MemoryEstimate zero1 =
        EstimateRankMemoryFor(config, n, StrategyKind::kZero1);
    config.set_grad_sync("every");
    const MemoryEstimate zero2 =
        EstimateRankMemoryFor(config, n, StrategyKind::kZero2);
    EXPECT_EQ(ddp.parameters() + ddp.gradients() + ddp.optimizer_state(),
              16 * p);
    EXPECT_EQ(zero1.parameters() + zero1.gradients() + zero1.optimizer_state(),
              8 * p + 8 * shard);
    EXPECT_EQ(zero1.collective_staging(), 2 * bucket);
    EXPECT_EQ(zero2.parameters() + zero2.gradients() + zero2.optimizer_state(),
              4 * p + 12 * shard);
    EXPECT_EQ(zero2.collective_staging(), 4 * bucket);
    EXPECT_LT(zero2.total(), zero1.total());
    EXPECT_LT(zero1.total(), ddp.total());
  }
  // zero2 with grad_sync=last and K > 1 keeps full gradients.
  config.set_grad_sync("last");
  config.set_grad_accum(2);
  EXPECT_EQ(EstimateRankMemoryFor(config, 2, StrategyKind::kZero2).gradients(),
            4 * (p + (p + 1) / 2));
}

// fsdp (memory_estimate.h): 16P/N of shards, the root gathered with its full
// gradient (8 Pr), the computing block gathered with its full gradient and,
// with prefetch, the next block (8 + 4f) Pu; the previous block's
// reduce-scatter in flight (8 Pu) and a prefetch gather's input (4f Pu).
// Without reshard every block is gathered at the end of the forward; with
// grad_sync=last and K > 1 every full gradient is kept.
TEST(MemoryEstimate, FsdpFollowsItsFormulaAndBeatsZero2WhenBlocksDominate) {
  TrainConfig config = TinyConfig();
  config.set_vocab_size(256);
  config.set_d_model(256);
  config.set_n_layers(8);
  config.set_grad_sync("every");
  const int64_t p = GptParameterCount(config);
  const int64_t root = GptRootUnitCount(config);
  const int64_t unit = GptBlockUnitCount(config);
  ASSERT_EQ(root + 8 * unit, p);
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    const int64_t shard = (p + n - 1) / n;
    for (bool prefetch : {false, true}) {
      config.set_fsdp_prefetch(prefetch);
      const int64_t f = prefetch ? 1 : 0;
      const MemoryEstimate fsdp =
          EstimateRankMemoryFor(config, n, StrategyKind::kFsdp);
      EXPECT_EQ(fsdp.parameters() + fsdp.gradients() + fsdp.optimizer_state(),
                4 * (4 * shard + 2 * root + (2 + f) * unit));
      EXPECT_EQ(fsdp.collective_staging(), 4 * (2 + f) * unit);
      EXPECT_LT(fsdp.total(),
                EstimateRankMemoryFor(config, n, StrategyKind::kZero2).total());
    }
    config.set_fsdp_prefetch(false);
    config.set_fsdp_keep_gathered_until_backward(true);
    EXPECT_EQ(EstimateRankMemoryFor(config, n, StrategyKind::kFsdp).parameters(),
              4 * (shard + root + 8 * unit));
    config.set_fsdp_keep_gathered_until_backward(false);
  }
  config.set_grad_sync("last");
  config.set_grad_accum(2);
  EXPECT_EQ(EstimateRankMemoryFor(config, 2, StrategyKind::kFsdp).gradients(),
            4 * (p + (p + 1) / 2));
}

TEST(MemoryEstimate, TheTableListsEveryStrategyOfAWorld) {
  TrainConfig config = TinyConfig();
  config.set_grad_sync("auto");
  const std::string two = RenderMemoryEstimates(config, 2);
  EXPECT_NE(two.find("| ddp (grad_sync last)"), std::string::npos) << two;
  EXPECT_NE(two.find("| zero1 (grad_sync last)"), std::string::npos) << two;
  EXPECT_NE(two.find("| zero2 (grad_sync every)"), std::string::npos) << two;
  EXPECT_NE(two.find("| fsdp (grad_sync every)"), std::string::npos) << two;
  EXPECT_EQ(two.find("| single"), std::string::npos) << two;
  EXPECT_NE(RenderMemoryEstimates(config, 1).find("| single"),
            std::string::npos);
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
