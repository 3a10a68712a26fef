// The checkpointer's device-free half (no LibTorch): what a rank does with
// bytes it already holds. A save's write-and-publish protocol (docs/checkpoint.md
// "The trainer"): this rank's shard files and state into staging, the three
// exchanges between ranks, rank 0's manifest, READY, rename, `latest` and
// retention; a resume's read of this rank's ranges and the check of its
// recorded state; and where a run is after a step (its RankState). The
// LibTorch trainer's Checkpointer (checkpointer.h) turns a strategy's pieces
// into shards and calls this; the CUDA trainer (trainer/cuda) calls it with
// its host copies of the device buffers, so both write the same format.
#ifndef MTB_TRAINER_CHECKPOINT_PROTOCOL_H_
#define MTB_TRAINER_CHECKPOINT_PROTOCOL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trace/recorder.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint.pb.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {

// Every rank's `bytes` for one exchange of a save (named "staging",
// "reports" or "outcome"), rank by rank; every rank calls it with the same
// name in the same order.
using Exchange = std::function<absl::StatusOr<std::vector<std::string>>(
    const std::string& name, const std::string& bytes)>;

// The exchange of a run of one rank: its own bytes.
Exchange SingleRankExchange();

// The names of a save's three exchanges, in order.
inline constexpr const char* kSaveExchanges[] = {"staging", "reports", "outcome"};

// Called at each checkpoint fault point with its phase (checkpoint_write
// mid-shard, checkpoint_before_ready, checkpoint_before_latest); --fault=
// acts there.
using FaultPoint = std::function<void(const char* phase)>;

// Test hooks of a save: `hold_before_write` before its first file is
// written; `after_publish` on rank 0 once `latest` names it.
struct PublishHooks {
  std::function<void(int64_t step)> hold_before_write;
  std::function<void(int64_t step)> after_publish;
};

// Who saves, where, and what every manifest records.
struct SaveTarget {
  std::string root;  // --checkpoint_dir
  int64_t keep_last = 0;
  std::string run_id;
  std::string strategy;  // the manifest's strategy name
  int rank = 0;
  int world_size = 1;
  TrainConfig config;  // the run's configuration as planned
  DataIdentity data;   // the plan's data identity
};

// Every rank's error ("" for none) -> OK, or one kInternal status "WHAT:
// rank R: error; ..." naming each rank that failed.
absl::Status AgreedVerdict(const std::vector<std::string>& errors, const std::string& what);

// Collective over `exchange`: saves the state after step `step`. Rank 0
// clears a staging directory a crashed save left; every rank writes `shards`
// and `state` into staging, fsynced and hashed as written; the reports reach
// rank 0, which publishes (manifest, READY, rename, `latest`) and prunes the
// run's checkpoints beyond keep_last. Every rank returns the same verdict.
// Spans "checkpoint write" and "checkpoint publish" go to `trace` (nullptr:
// none). blocking_ms is the caller's to set.
absl::StatusOr<CheckpointSave> WriteAndPublish(const SaveTarget& target, int64_t step,
                                               const std::vector<TensorShard>& shards,
                                               const RankState& state,
                                               const Exchange& exchange,
                                               trace::TraceRecorder* trace,
                                               const FaultPoint& fault_point,
                                               const PublishHooks& hooks = {});

// This rank's part of a resume from plan.resume_dir: reads `requests` (the
// ranges it must hold, straight into their destinations) and checks its
// recorded state (rank_RRRRR.meta; rank 0's, at the global position, on a
// reshard) against `expected` (CheckRankState). With plan.hash_on_load what
// it reads is hashed against the manifest first; *hashed_bytes is set to
// those bytes (0 without). Local: the caller agrees the verdict with the
// other ranks.
absl::Status ReadRankState(const CheckpointPlan& plan, int rank,
                           const std::vector<RangeRequest>& requests,
                           const RankState& expected, int64_t* hashed_bytes);

// kFailedPrecondition listing every field of `recorded` (a resumed rank's
// saved state) that differs from `expected` (what this run's configuration
// gives at that step): a resume that is not where it thinks it is.
absl::Status CheckRankState(const RankState& recorded, const RankState& expected);

// A run's CheckpointInfo for its result, from its plan, its run id and the
// bytes it hashed when it loaded (saves and load_ms are the caller's).
CheckpointInfo CheckpointInfoOf(const CheckpointPlan& plan, const std::string& run_id,
                                int64_t load_hashed_bytes);

// Where rank `rank` of a run with `data_ranks` data-parallel ranks is after
// `step` optimizer steps of `config`: step, micro-step, tokens, the next
// global sample, the seed, the next keys' step and the last rate.
RankState ProgressStateOf(const TrainConfig& config, int rank, int data_ranks, int64_t step);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_PROTOCOL_H_
