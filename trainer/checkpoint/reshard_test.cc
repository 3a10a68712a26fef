// Resharding resume (docs/checkpoint.md, "Resharding"): a checkpoint of
// fsdp on 2 rank threads loaded onto fsdp on 3 and onto ddp on 1 rank, with
// the same global batch (2 x 3 = 3 x 2 = 1 x 3 x --grad_accum=2).
//   - Offline (--steps equal to the checkpoint's step): nothing is trained,
//     the loaded state is saved at once in the new layout, and that
//     checkpoint compares equal, bit for bit over the global tensors, to the
//     one it was loaded from (model, AdamW m, v and step, schedule, train
//     state, data position); resharded back to 2 ranks its shard files are
//     byte-identical to the original's.
//   - Continued: the resumed run reads exactly the global samples of the
//     continuous run's steps 4..6 (each once), reports resume_exact=false
//     with the reason, and its losses stay within a stated tolerance of the
//     continuous run's (only the reduction order differs).
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/compare.h"
#include "trainer/checkpoint/resume_test_util.h"
#include "trainer/data/data.h"

namespace mtb::checkpoint {
namespace {

constexpr int kGlobalBatch = 6;

// `strategy` on `ranks` ranks with the global batch of 6 samples.
TrainConfig Layout(const std::string& strategy, int ranks, int steps) {
  TrainConfig config = ResumeConfig(strategy, steps);
  const int per_rank = kGlobalBatch / ranks;
  // One rank takes its 6 samples as 2 micro-batches of 3.
  config.set_grad_accum(ranks == 1 ? 2 : 1);
  config.set_batch_size(ranks == 1 ? per_rank / 2 : per_rank);
  return config;
}

std::string Step3(const std::string& root) { return root + "/step_00000003"; }

TEST(Reshard, FsdpOnTwoRanksSavedOfflineOnThreeFsdpRanksAndOneDdpRankComparesEqual) {
  const std::string two = TestDir("fsdp2");
  ASSERT_TRUE(Train(Layout("fsdp", 2, 3), 2, Saving(two, 3)).status.ok());

  // --steps=3 at a step-3 checkpoint: nothing trained, saved at once.
  const std::string three = TestDir("fsdp3");
  const RunOutput to_three = Train(Layout("fsdp", 3, 3), 3, Saving(three, 1, Step3(two)));
  ASSERT_TRUE(to_three.status.ok()) << to_three.status;
  const CheckpointInfo& info = to_three.result.checkpoint();
  EXPECT_FALSE(info.resume_exact());
  EXPECT_TRUE(
      absl::StrContains(info.resume_inexact_reason(),
                        "resumed onto another layout (world size 2 -> 3, --batch_size 3 -> 2)"))
      << info.resume_inexact_reason();
  EXPECT_EQ(to_three.result.runs(0).steps_size(), 0) << "nothing is trained";
  ASSERT_EQ(info.saves_size(), 1);
  EXPECT_EQ(info.saves(0).name(), "step_00000003");
  absl::StatusOr<CheckpointManifest> manifest = ReadManifest(Step3(three));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->world_size(), 3);
  EXPECT_TRUE(PathExists(Step3(three) + "/rank_00002.bin"));
  ExpectEqualCheckpoints(Step3(two), Step3(three));

  const std::string one = TestDir("ddp1");
  const RunOutput to_one = Train(Layout("ddp", 1, 3), 1, Saving(one, 1, Step3(two)));
  ASSERT_TRUE(to_one.status.ok()) << to_one.status;
  manifest = ReadManifest(Step3(one));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->world_size(), 1);
  EXPECT_EQ(manifest->strategy(), "ddp");
  ExpectEqualCheckpoints(Step3(two), Step3(one));

  // Back from ddp on 1 rank to fsdp on 2: the very shard files it came from.
  const std::string back = TestDir("back");
  ASSERT_TRUE(Train(Layout("fsdp", 2, 3), 2, Saving(back, 1, Step3(one))).status.ok());
  for (const char* file : {"rank_00000.bin", "rank_00001.bin"}) {
    EXPECT_EQ(FileBytes(Step3(back) + "/" + file), FileBytes(Step3(two) + "/" + file)) << file;
  }
}

TEST(Reshard, AGlobalBatchThatDiffersIsRefusedNamingIt) {
  const std::string two = TestDir("fsdp2");
  ASSERT_TRUE(Train(Layout("fsdp", 2, 3), 2, Saving(two, 3)).status.ok());
  TrainConfig other = Layout("fsdp", 3, 3);
  other.set_batch_size(3);  // 3 x 3 = 9, not 6
  const RunOutput refused = Train(other, 3, Saving(TestDir("fsdp3"), 1, Step3(two)));
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status.message(),
                                "global batch (world size x --batch_size x --grad_accum): "
                                "checkpoint 2 x 3 x 1 = 6, this run 3 x 3 x 1 = 9"))
      << refused.status;
}

// The steps 4..6 of a run resumed from `checkpoint` on `ranks` ranks of
// `strategy`, checked against the continuous 2-rank run.
void ExpectContinues(const std::string& strategy, int ranks, const std::string& checkpoint,
                     const RunOutput& full,
                     const std::map<std::pair<int64_t, int64_t>, int>& full_seen,
                     const std::map<std::pair<int64_t, int64_t>, int>& part_seen,
                     const DataSource& base) {
  SCOPED_TRACE(strategy + " on " + std::to_string(ranks));
  RecordingData data(&base);
  TrainOptions train;
  train.data = &data;
  const RunOutput resumed =
      Train(Layout(strategy, ranks, 6), ranks, Saving(TestDir(strategy), 6, checkpoint), train);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_FALSE(resumed.result.checkpoint().resume_exact());
  EXPECT_TRUE(absl::StrContains(resumed.result.checkpoint().resume_inexact_reason(),
                                "gradients are summed in another order"));

  // The samples across the switch are the continuous run's, each read once.
  std::map<std::pair<int64_t, int64_t>, int> seen = part_seen;
  for (const auto& [key, count] : data.Seen()) seen[key] += count;
  EXPECT_EQ(seen, full_seen);

  // Training continues from the same state: the losses of steps 4..6 equal
  // the continuous run's up to the reduction order. Tolerance 1e-5: measured
  // differences are at most 2.4e-7 (fsdp on 3 ranks; ddp on 1 rank happened
  // to match exactly), while consecutive steps' losses differ by >= 0.014,
  // so a wrong sample, a lost optimizer moment or a repeated step shows.
  const auto& tail = resumed.result.runs(0).steps();
  ASSERT_EQ(tail.size(), 3);
  for (int i = 0; i < 3; ++i) {
    const StepRecord& expected = full.result.runs(0).steps(3 + i);
    EXPECT_EQ(tail[i].step(), expected.step());
    EXPECT_EQ(tail[i].lr(), expected.lr()) << "the schedule is continued exactly";
    EXPECT_NEAR(tail[i].loss(), expected.loss(), 1e-5) << "step " << expected.step();
  }
}

TEST(Reshard, ContinuingOnThreeFsdpRanksOrOneDdpRankReadsTheContinuousRunsSamples) {
  const auto base = TensorData(MakeSyntheticSamples(7, 64, 16));
  RecordingData full_data(base.get());
  TrainOptions train;
  train.data = &full_data;
  const RunOutput full = Train(Layout("fsdp", 2, 6), 2, Saving(TestDir("full"), 6), train);
  ASSERT_TRUE(full.status.ok()) << full.status;
  const auto full_seen = full_data.Seen();
  ASSERT_EQ(full_seen.size(), 6u * kGlobalBatch);
  for (const auto& [key, count] : full_seen) {
    EXPECT_EQ(count, 1) << "step " << key.first << " sample " << key.second;
    EXPECT_LT(key.second, kGlobalBatch);
  }

  RecordingData part_data(base.get());
  train.data = &part_data;
  const std::string part = TestDir("part");
  ASSERT_TRUE(Train(Layout("fsdp", 2, 3), 2, Saving(part, 3), train).status.ok());
  ExpectContinues("fsdp", 3, Step3(part), full, full_seen, part_data.Seen(), *base);
  ExpectContinues("ddp", 1, Step3(part), full, full_seen, part_data.Seen(), *base);
}

}  // namespace
}  // namespace mtb::checkpoint
