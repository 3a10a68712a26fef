// Test support for the strategy tests (zero_test, fsdp_test): train the same
// configuration on N rank threads over Gloo (or one rank without a
// communicator) with a strategy of the caller's making, and keep what each
// rank saw. Threads, not processes: nothing process-global (allocator,
// default generator) is checked through it.
#ifndef MTB_TRAINER_STRATEGY_RANK_RUNS_H_
#define MTB_TRAINER_STRATEGY_RANK_RUNS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "common/collective/communicator.h"
#include "trainer/run/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb {

struct RankRun {
  std::vector<StepRecord> steps;
  // After the last step (Strategy::GatherFullParameters first), model order.
  std::vector<at::Tensor> params;
  std::vector<BucketSummary> buckets;
  bool any_gradient_defined = false;  // after the last step
  int64_t shard_numel = 0;            // filled by the caller's `after`
};

// `communicator` is nullptr on one rank.
using StrategyFactory =
    std::function<std::unique_ptr<Strategy>(collective::Communicator*)>;
// Called on each rank after its last step, before the parameters are read.
using AfterTraining = std::function<void(Strategy&, RankRun&)>;

// Trains config.steps() steps of `config` (resolved, valid; its --data,
// synthetic or a token file the test ships) on `world_size` ranks; gtest
// failures name the rank's status. One intra-op thread.
std::vector<RankRun> TrainOnRankThreads(const TrainConfig& config,
                                        int world_size,
                                        const StrategyFactory& make,
                                        const AfterTraining& after = {});

// The tiny config with sizes 3 does not divide: d_model 20 (biases and
// LayerNorms of 20, blocks of 12*400 + 13*20 = 5060 elements, the root 1100),
// vocab 37, dropout 0.1, clipping at 0.5 (active), weight decay 0.1, batch 2.
TrainConfig UnevenConfig();

// Every tensor of `a` equals its counterpart in `b` bit for bit.
void ExpectAllEqual(const std::vector<at::Tensor>& a,
                    const std::vector<at::Tensor>& b, const std::string& what);

// Every tensor of `a` is AllClose to its counterpart in `b` within the
// strategy thread tests' tolerance for runs whose fp32 summation order
// differs (rtol 1e-5, atol 1e-6: see ddp_process_test.cc for its grounds).
void ExpectAllClose(const std::vector<at::Tensor>& a,
                    const std::vector<at::Tensor>& b, const std::string& what);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_RANK_RUNS_H_
