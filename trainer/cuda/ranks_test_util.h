// Multi-rank tests of trainer_cuda on a CPU (bucket_sync_test,
// multi_rank_checkpoint_test): RunCudaTraining at several rank threads over
// common/collective (Gloo on 127.0.0.1, host buffers) with a stand-in
// device model that does what the GPU model does for several ranks: it
// readies its gradients at the GPU backward's points (the final LayerNorm,
// each block from the last, the embeddings) and tells the hook, and
// implements the sharded update (AdamW on pieces, elementwise as the
// kernel). Element i's gradient is the mean over the step's rows of
// (token + i) mod 4, negated where the parameter is negative: small
// integers over the row count, so averages over a power-of-two number of
// ranks are exact, and a parameter that is not gathered changes later
// gradients.
#ifndef MTB_TRAINER_CUDA_RANKS_TEST_UTIL_H_
#define MTB_TRAINER_CUDA_RANKS_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/cuda/gpt_cuda.h"
#include "trainer/cuda/run.h"
#include "trainer/strategy/sync_plan.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace cuda {

// Several buckets: 470,800 elements (1.9 MB; the first bucket holds 1 MiB,
// the later ones 0.05 MB, about one large weight each), sizes that 3 and 4
// do not always divide; clipping active; 3 steps.
TrainConfig RanksConfig(TrainConfig::Strategy strategy, int64_t batch_size);

// What a rank's stand-in saw, for the checks.
struct Seen {
  std::vector<float> parameters;   // at the end of the run
  std::vector<UpdatePiece> pieces;  // the last sharded update's
  // "point k t1 t2 ..." (backward's point k readied tensors t1, t2, ...)
  // and "launch" (the next bucket's collective), in order.
  std::vector<std::string> log;
};

// One rank's run.
struct RankOutcome {
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  Seen seen;
  std::vector<std::string> calls;
  std::vector<std::vector<int64_t>> scatter_counts, gather_counts;
};

// The stand-in device model; drop_loaded_state: LoadState does nothing
// (a resume's negative case).
GptCudaFactory StandInFactory(const TrainConfig& config, Seen* seen,
                              bool drop_loaded_state = false);

// One rank alone, no collectives.
RankOutcome RunAlone(const TrainConfig& config,
                     const checkpoint::CheckpointPlan& plan = checkpoint::CheckpointPlan(),
                     bool drop_loaded_state = false);

// `world` rank threads (B = config's batch each) over common/collective,
// the checkpoint exchanges between them through ThreadExchange.
std::vector<RankOutcome> RunRanks(
    const TrainConfig& config, int world,
    const checkpoint::CheckpointPlan& plan = checkpoint::CheckpointPlan(),
    bool drop_loaded_state = false);

std::vector<double> Losses(const TrainResult& r);
std::vector<double> Norms(const TrainResult& r);
std::vector<bool> Clipped(const TrainResult& r);

// The plan RunCudaTraining makes for `config` over `world` ranks.
SyncPlan PlanFor(const TrainConfig& config, int world);

// The checkpoint plan for `world` ranks saving every `save_every` steps in
// `dir` (0: never), resuming from `resume` ("" or "latest"), as the trainer
// plans it; a failed plan fails the calling test and is empty.
checkpoint::CheckpointPlan CheckpointPlanFor(const std::string& dir, int64_t save_every,
                                             const std::string& resume, int world,
                                             TrainConfig* config);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_RANKS_TEST_UTIL_H_
