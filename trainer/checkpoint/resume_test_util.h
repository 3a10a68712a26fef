// What the checkpoint tests share (resume_test, reshard_test, async_test):
// a config that makes a resume hard, the tests' strategies, and training on
// rank threads over Gloo with checkpoints, planned as the binary's main
// plans (before any rank). Nothing process-global is involved: data and
// dropout masks are counter-based, keyed by seed, step and global sample.
#ifndef MTB_TRAINER_CHECKPOINT_RESUME_TEST_UTIL_H_
#define MTB_TRAINER_CHECKPOINT_RESUME_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/status.h"
#include "common/collective/communicator.h"
#include "common/trace/recorder.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/data/data.h"
#include "trainer/run/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {

// $TEST_TMPDIR/<test name>/<name>, removed first.
std::string TestDir(const std::string& name);

// Tiny, with the numbers that make a resume hard: dropout, a cosine
// schedule with warm-up (its decay end given, so that a 3-step run has the
// 6-step run's schedule), clipping that is active, weight decay.
TrainConfig ResumeConfig(const std::string& strategy, int steps);

// single, ddp, zero1/2 (several buckets) or fsdp, as the tests build them.
std::unique_ptr<Strategy> MakeTestStrategy(const TrainConfig& config,
                                           collective::Communicator* communicator);

struct RunOutput {
  TrainResult result;              // rank 0's
  std::vector<at::Tensor> params;  // rank 0's final parameters
  absl::Status status;             // rank 0's
};

// What a test may add to a run.
struct TrainOptions {
  std::set<std::string> given = {"lr_warmup_steps", "lr_decay_steps"};
  trace::TraceRecorder* trace = nullptr;  // rank 0's
  std::vector<std::string>* notes = nullptr;
  // The data every rank reads (nullptr: the config's synthetic data).
  const DataSource* data = nullptr;
  // Called on each rank before training (e.g. Checkpointer::set_test_hooks).
  std::function<void(Checkpointer&, int rank)> setup;
  // RunHooks::after_step, on each rank.
  std::function<void(int64_t step, int rank)> after_step;
  // Called on each rank after training with its communicator (nullptr on
  // one rank of "single").
  std::function<void(collective::Communicator*, int rank)> after_run;
  // When set (world_size entries), each rank's status goes to its entry and
  // no rank's failure is a test failure: for runs meant to fail
  // (TrainAllowingFailure). Unset, every rank other than 0 must succeed.
  std::vector<absl::Status>* rank_statuses = nullptr;
};

// Plans and runs `config` on `world_size` rank threads (one rank of
// "single": the calling thread, no communicator) with checkpoints as
// `options` say.
RunOutput Train(TrainConfig config, int world_size, const CheckpointOptions& options,
                const TrainOptions& train = {});
RunOutput Train(TrainConfig config, int world_size, const CheckpointOptions& options,
                const std::set<std::string>& given, trace::TraceRecorder* trace = nullptr,
                std::vector<std::string>* notes = nullptr);

// Train for a run that may fail on any rank: every rank's status, rank by
// rank (a planning failure: world_size copies of it); `out`, if given, gets
// rank 0's output.
std::vector<absl::Status> TrainAllowingFailure(TrainConfig config, int world_size,
                                               const CheckpointOptions& options,
                                               TrainOptions train = {},
                                               RunOutput* out = nullptr);

CheckpointOptions Saving(const std::string& dir, int save_every, const std::string& resume = "");

std::string FileBytes(const std::string& path);

// Every file of a directory tree by relative path -> SHA-256.
std::map<std::string, std::string> HashTree(const std::string& dir);

// Checkpoint directories `left` and `right` compare equal bit for bit over
// their global tensors and every part digest (compare.h); the differences
// are printed when not.
void ExpectEqualCheckpoints(const std::string& left, const std::string& right);

// A DataSource that records every (step, global sample) read through it,
// from any rank thread.
class RecordingData : public DataSource {
 public:
  explicit RecordingData(const DataSource* data) : data_(data) {}
  Batch Get(int64_t step, int64_t first_sample, int64_t count) const override;
  std::string Describe() const override { return data_->Describe(); }
  // (step, sample) -> how many times it was read.
  std::map<std::pair<int64_t, int64_t>, int> Seen() const;

 private:
  const DataSource* data_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int64_t, int64_t>, int> seen_;
};

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_RESUME_TEST_UTIL_H_
