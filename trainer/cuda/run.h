// trainer_cuda's run: the config checks of the CUDA path, then the steps of one
// run on one GPU through GptCuda (gpt_cuda.h), recorded as the LibTorch trainer
// records them (TrainResult: runs[].steps[], model, provenance). The device
// model is passed in, so the loop, the data and the result are tested on a CPU
// with a stand-in.
#ifndef MTB_TRAINER_CUDA_RUN_H_
#define MTB_TRAINER_CUDA_RUN_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/checkpoint/protocol.h"
#include "trainer/cuda/bucket_sync.h"
#include "trainer/cuda/gpt_cuda.h"
#include "trainer/cuda/layout.h"
#include "trainer/data/samples.h"
#include "trainer/strategy/sync_plan.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace cuda {

// How trainer_cuda synchronises a strategy's ranks, from its registry entry:
// nothing (one rank only: single); the gradient's buckets all-reduced (a
// whole gradient on every rank and nothing gathered: ddp); the buckets
// reduce-scattered, each rank updating its shard of the parameters and
// AdamW's moments and the parameters all-gathered after (a whole gradient
// and a parameter gather: zero1). Unimplemented for the strategies that
// shard the gradient during backward (zero2, fsdp).
enum class CudaSync { kNone, kAllReduce, kShardedUpdate };
absl::StatusOr<CudaSync> CudaSyncOf(const TrainConfig& config);

// The values the CUDA path does not implement yet, refused with one line
// naming the flag (kInvalidArgument): a
// --strategy whose CudaSyncOf is unimplemented, single on several GPUs,
// --dropout > 0, --grad_accum > 1,
// --repeat > 1, --reduction=exact, --activation_checkpointing. Call after
// ResolveConfig and ValidateConfig.
absl::Status CheckCudaConfig(const TrainConfig& config, int world_size = 1);

// Makes the device model for `layout` initialised with `parameters`; null and
// *error on failure (CreateGptCuda on a GPU, trainer_cuda's main).
using GptCudaFactory = std::function<std::unique_ptr<GptCuda>(
    const GptDims& dims, const ParameterLayout& layout,
    const float* parameters, std::string* error)>;

// A synchronised run (ddp or zero1 over NCCL, at any world size): this
// rank's place and what it shares with the others. Rank r trains samples
// [r B, (r + 1) B) of each step's global batch of world_size x B (the CPU
// trainer's split). The gradient's buckets (MakeSyncPlan with the config's
// bucket caps, the CPU trainer's plan) are launched during backward as soon
// as their last gradient is final (BucketSync as the model's
// GradientReadyHook; after backward when the config's
// ddp_launch_after_backward is set — --ddp_overlap=false, which
// trainer_cuda's flags do not take yet — or the model never calls the hook): ddp all-reduces them (average) and updates the whole
// buffer; zero1 reduce-scatters them into this rank's shard, updates its
// shard only (Zero1Update: the norm summed over ranks, AdamW on its pieces)
// and all-gathers the parameters. The loss recorded is `average_loss` of
// the ranks' losses (the global batch's mean).
struct CudaRanks {
  int rank = 0;
  int world_size = 1;
  SyncCollectives* collectives = nullptr;  // null: one rank, nothing synchronised
  CollectiveStream* stream = nullptr;      // the collectives' device stream, or null
  // Every rank's value averaged over the ranks (collective, on the host).
  std::function<double(double)> average_loss;
  // Every rank's value summed over the ranks (collective, on the host):
  // zero1's squared gradient norm.
  std::function<double(double)> sum_over_ranks;
  // Checkpoints: every rank's bytes, rank by rank (the checkpoint
  // protocol's exchanges; a resume's agreed verdict). Empty: one rank.
  checkpoint::Exchange exchange;
};

// The rendezvous of the rank threads of one process: the k-th call of every
// rank meets the k-th call of the others and each gets every rank's value in
// rank order. Thread-safe.
template <typename T>
class ThreadRounds {
 public:
  explicit ThreadRounds(int world_size) : world_size_(world_size) {}
  int world_size() const { return world_size_; }
  std::vector<T> Gather(int rank, T mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t index = rounds_[rank]++;
    Round& round = open_[index];
    round.values.resize(world_size_);
    round.values[rank] = std::move(mine);
    if (++round.arrived == world_size_) {
      round.left = world_size_;
      changed_.notify_all();
    }
    changed_.wait(lock, [&] { return round.arrived == world_size_; });
    std::vector<T> all = round.values;
    if (--round.left == 0) open_.erase(index);
    return all;
  }

 private:
  const int world_size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, int64_t> rounds_;  // per rank: its calls so far
  struct Round {
    std::vector<T> values;  // per rank
    int arrived = 0;
    int left = 0;  // ranks that have not read the result yet
  };
  std::map<int64_t, Round> open_;
};

// The checkpoint protocol's exchange between the rank threads of one
// process: every rank's bytes in rank order.
class ThreadExchange {
 public:
  explicit ThreadExchange(int world_size) : rounds_(world_size) {}
  std::vector<std::string> Exchange(int rank, std::string mine) {
    return rounds_.Gather(rank, std::move(mine));
  }
  // As a CudaRanks::exchange for `rank`.
  checkpoint::Exchange For(int rank);

 private:
  ThreadRounds<std::string> rounds_;
};

// Values averaged on the host between the rank threads of one process (a
// run on several GPUs: each rank's loss; a test's stand-in collectives):
// each gets the ranks' sum in rank order over world_size.
class ThreadAverage {
 public:
  explicit ThreadAverage(int world_size) : rounds_(world_size) {}
  // In place: values[0, n) of every rank averaged (summed in float).
  void Average(int rank, float* values, int64_t n);
  // Summed in double.
  double Average(int rank, double value);
  // The ranks' sum (in rank order, in double).
  double Sum(int rank, double value);

 private:
  ThreadRounds<std::vector<double>> rounds_;
};

// Trains config.steps() steps from the seeded initialisation on `samples`.
// `device` goes into the result's provenance. With `checkpoints` (the plan
// PlanCheckpoints made for the run's ranks; default: none) the run resumes from its
// checkpoint (the parameters, AdamW's moments and count, its recorded state
// checked against where this configuration is at that step) and saves after
// the steps the plan names, in the CPU trainer's format (checkpoint_state.h:
// one rank, single's; several, each rank its ddp slice or zero1 shards, the
// ranks agreeing through `ranks.exchange`) through the same protocol
// (trainer/checkpoint/protocol.h); the result's
// `checkpoint` says what it did. Errors: kResourceExhausted when the model
// cannot be created (the factory's line), kFailedPrecondition
// (deterministic) on a non-finite loss; a resume or save that fails, as the
// CPU trainer words it.
absl::StatusOr<TrainResult> RunCudaTraining(
    const TrainConfig& config, const SampleSource& samples,
    const DeviceInfo& device, const GptCudaFactory& factory,
    const checkpoint::CheckpointPlan& checkpoints = checkpoint::CheckpointPlan(),
    const CudaRanks& ranks = CudaRanks());

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_RUN_H_
