#include "trainer/strategy/rank_runs.h"

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "common/collective/test_util.h"
#include "common/libtorch/allclose.h"
#include "gtest/gtest.h"
#include "trainer/data/data.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"

namespace mtb {

std::vector<RankRun> TrainOnRankThreads(const TrainConfig& config,
                                        int world_size,
                                        const StrategyFactory& make,
                                        const AfterTraining& after) {
  at::set_num_threads(1);
  absl::StatusOr<std::unique_ptr<DataSource>> data = TensorData(OpenSamplesFor(config));
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return {};
  std::vector<RankRun> runs(world_size);
  auto body = [&](collective::Communicator* communicator, int rank) {
    std::unique_ptr<Strategy> strategy = make(communicator);
    auto trainer = Trainer::Create(config, RankInfo{rank, world_size},
                                   strategy.get(), data->get());
    ASSERT_TRUE(trainer.ok()) << "rank " << rank << ": " << trainer.status();
    RankRun& run = runs[rank];
    for (int step = 0; step < config.steps(); ++step) {
      absl::StatusOr<StepRecord> record = (*trainer)->Step();
      ASSERT_TRUE(record.ok()) << "rank " << rank << ": " << record.status();
      run.steps.push_back(*record);
    }
    for (const NamedParameter& p : (*trainer)->model().parameters()) {
      run.any_gradient_defined |= p.tensor.grad().defined();
    }
    if (after) after(*strategy, run);
    const absl::Status gathered = strategy->GatherFullParameters();
    ASSERT_TRUE(gathered.ok()) << "rank " << rank << ": " << gathered;
    for (const NamedParameter& p : (*trainer)->model().parameters()) {
      run.params.push_back(p.tensor.detach().clone());
    }
    run.buckets = strategy->Buckets();
  };
  if (world_size == 1) {
    body(nullptr, 0);
  } else {
    const absl::Status status = collective::RunRanksAsThreads(
        world_size, [&](collective::Communicator& c) { body(&c, c.rank()); });
    EXPECT_TRUE(status.ok()) << status;
  }
  return runs;
}

TrainConfig UnevenConfig() {
  TrainConfig config = TinyConfig();
  config.set_d_model(20);
  config.set_vocab_size(37);
  config.set_dropout(0.1);
  config.set_max_grad_norm(0.5);  // clipping active
  config.set_weight_decay(0.1);
  config.set_batch_size(2);
  return config;
}

void ExpectAllEqual(const std::vector<at::Tensor>& a,
                    const std::vector<at::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i], b[i])) << what << " parameter " << i;
  }
}

void ExpectAllClose(const std::vector<at::Tensor>& a,
                    const std::vector<at::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    const AllCloseResult close = AllClose(a[i], b[i], 1e-5, 1e-6);
    EXPECT_TRUE(close.ok) << what << " parameter " << i << ": " << close.message;
  }
}

}  // namespace mtb
