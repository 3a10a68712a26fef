// trainer_cuda's multi-GPU side on a CPU: RunCudaTraining at 2-4 rank threads
// over the project's communicators (common/collective, Gloo on 127.0.0.1,
// host buffers) with a stand-in device model that implements what the GPU
// model does for several ranks (the gradient-ready points of backward, the
// sharded update), so the bucketing, the overlap and ZeRO-1's sharding run
// exactly as on GPUs, through BucketSync and Zero1Update:
//
//   - zero1 at 2 and 4 ranks equals one rank bit for bit (losses, norms,
//     clipping, every parameter); at 3 ranks it equals ddp at 3 ranks bit for
//     bit in the parameters and losses, the norm within a derived bound;
//   - each rank updates exactly the elements the CPU trainer's zero1 gives
//     it (the plan's shards: sync_plan_test shows them equal to
//     ZeroStrategy's), and moves the bytes the CPU trainer's zero1 counts
//     (collective/traffic.h on the same shard counts);
//   - a plan with one wrong shard boundary is refused and its ownership
//     differs (the negative case);
//   - the buckets launch while backward runs: each as soon as its last
//     gradient is final (an ordering log of backward's points and the
//     launches); the sync after backward (--ddp_overlap=false) fails that
//     check (the negative case), with the same numbers.
//
// Why bit for bit: the stand-in's gradients are small integers over a
// power-of-two row count (dyadic, 7 significant bits), so averaging over 2
// or 4 ranks is exact, their squares have at most 14 significant bits and
// the squared norm (< 2^33 ulps of the smallest square) is exact in double
// in any summation order; the update is elementwise. Over 3 ranks the
// average divides by 3 (rounded), so the squares carry up to 48 bits and the
// norm's double sum depends on its order: zero1 (per-shard sums added over
// ranks) and ddp (one sum over the buffer) each have relative error at most
// (N - 1) u (N elements, u = 2^-53), hence differ by at most 2 (N - 1) u
// relative in the squared norm; clipping is off there so the parameters
// stay bit for bit.
#include "trainer/cuda/bucket_sync.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/collective/traffic.h"
#include "gtest/gtest.h"
#include "trainer/cuda/gpt_tensors.h"
#include "trainer/cuda/layout.h"
#include "trainer/cuda/ranks_test_util.h"
#include "trainer/model/model_shape.h"

namespace mtb {
namespace cuda {
namespace {

// The stand-in's gradients, norms and update: what every rank compares to.
const RankOutcome& Alone() {
  static const RankOutcome* const alone =
      new RankOutcome(RunAlone(RanksConfig(TrainConfig::single, /*batch_size=*/4)));
  return *alone;
}

void ExpectBitForBit(const RankOutcome& got, const RankOutcome& want, bool norms) {
  ASSERT_TRUE(got.result.ok()) << got.result.status();
  ASSERT_TRUE(want.result.ok()) << want.result.status();
  EXPECT_EQ(Losses(*got.result), Losses(*want.result));
  if (norms) {
    EXPECT_EQ(Norms(*got.result), Norms(*want.result));
    EXPECT_EQ(Clipped(*got.result), Clipped(*want.result));
  }
  ASSERT_EQ(got.seen.parameters.size(), want.seen.parameters.size());
  int64_t differ = 0;
  for (size_t i = 0; i < got.seen.parameters.size(); ++i) {
    differ += std::memcmp(&got.seen.parameters[i], &want.seen.parameters[i], sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 0) << "parameters that differ";
}

TEST(Zero1, TwoAndFourRanksEqualOneRankBitForBit) {
  ASSERT_TRUE(Alone().result.ok()) << Alone().result.status();
  const std::vector<bool> clipped = Clipped(*Alone().result);
  EXPECT_NE(std::find(clipped.begin(), clipped.end(), true), clipped.end());
  for (int world : {2, 4}) {
    SCOPED_TRACE(absl::StrCat("world ", world));
    const std::vector<RankOutcome> ranks = RunRanks(RanksConfig(TrainConfig::zero1, 4 / world), world);
    for (const RankOutcome& rank : ranks) ExpectBitForBit(rank, Alone(), /*norms=*/true);
  }
}

// Over 3 ranks (uneven shards): zero1 equals ddp in the parameters and
// losses bit for bit, the norm within 2 (N - 1) u relative (file comment);
// each rank updates exactly its shards of the CPU trainer's plan and moves
// the bytes the CPU trainer's zero1 counts for them.
TEST(Zero1, ThreeRanksOwnTheCpuTrainersShardsAndMoveTheirBytes) {
  TrainConfig zero1 = RanksConfig(TrainConfig::zero1, 1);
  zero1.set_max_grad_norm(0);
  TrainConfig ddp = zero1;
  ddp.set_strategy(TrainConfig::ddp);
  const int world = 3;
  const std::vector<RankOutcome> sharded = RunRanks(zero1, world);
  const std::vector<RankOutcome> replicated = RunRanks(ddp, world);
  const SyncPlan plan = PlanFor(zero1, world);
  ASSERT_GT(plan.buckets.size(), 8u);
  bool uneven = false;
  for (const PlanBucket& bucket : plan.buckets) uneven |= bucket.numel % world != 0;
  EXPECT_TRUE(uneven) << "no bucket exercises uneven shards";
  const double bound = 2.0 * (plan.numel - 1) * std::ldexp(1.0, -53);
  std::vector<int> owner(plan.numel, -1);
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ExpectBitForBit(sharded[r], replicated[r], /*norms=*/false);
    const std::vector<double> got = Norms(*sharded[r].result);
    const std::vector<double> want = Norms(*replicated[r].result);
    for (size_t s = 0; s < got.size(); ++s) {
      EXPECT_LE(std::abs(got[s] * got[s] - want[s] * want[s]), bound * want[s] * want[s]) << s;
    }
    // Ownership: the pieces this rank updated, element by element.
    int64_t shard_at = 0, last_offset = -1;
    for (const UpdatePiece& piece : sharded[r].seen.pieces) {
      EXPECT_EQ(piece.shard_offset, shard_at);  // back to back,
      EXPECT_GT(piece.offset, last_offset);     // in the flat buffer's order
      last_offset = piece.offset;
      shard_at += piece.numel;
      for (int64_t e = piece.offset; e < piece.offset + piece.numel; ++e) {
        ASSERT_EQ(owner[e], -1) << "element " << e << " updated twice";
        owner[e] = r;
      }
    }
    EXPECT_EQ(shard_at, plan.ShardNumel(r));
    // Bytes: every step, one reduce-scatter and one all-gather per bucket
    // with the plan's counts, in launch order; sent bytes by the layer's
    // byte model, as ZeroStrategy counts its expected bytes.
    const int64_t steps = zero1.steps();
    ASSERT_EQ(sharded[r].scatter_counts.size(), plan.buckets.size() * steps);
    ASSERT_EQ(sharded[r].gather_counts.size(), plan.buckets.size() * steps);
    int64_t sent = 0;
    for (size_t i = 0; i < sharded[r].scatter_counts.size(); ++i) {
      const std::vector<int64_t>& counts = plan.buckets[i % plan.buckets.size()].counts;
      EXPECT_EQ(sharded[r].scatter_counts[i], counts) << i;
      EXPECT_EQ(sharded[r].gather_counts[i], counts) << i;
      sent += collective::ReduceScatterVTraffic(counts, 4, r).sent +
              collective::AllGatherVTraffic(counts, 4, r).sent;
    }
    // The result records the same per step (expected by the byte model).
    for (const StepRecord& record : sharded[r].result->runs(0).steps()) {
      EXPECT_EQ(record.expected_grad_bytes() + record.expected_param_gather_bytes(),
                sent / steps);
      EXPECT_EQ(record.grad_syncs(), 1);
    }
    int64_t all_reduce = 0;
    for (const PlanBucket& bucket : plan.buckets) {
      all_reduce += collective::AllReduceTraffic(bucket.numel * 4, world).sent;
    }
    for (const StepRecord& record : replicated[r].result->runs(0).steps()) {
      EXPECT_EQ(record.expected_grad_bytes(), all_reduce);
      EXPECT_EQ(record.expected_param_gather_bytes(), 0);
    }
    int64_t own = 0;
    for (const PlanBucket& bucket : plan.buckets) own += bucket.counts[r];
    // Reduce-scatter: every other rank's part of each bucket; all-gather:
    // this rank's part to the 2 others.
    EXPECT_EQ(sent, steps * 4 * ((plan.numel - own) + (world - 1) * own));
  }
  for (int64_t e = 0; e < plan.numel; ++e) {
    ASSERT_EQ(owner[e], plan.OwnerOf(e)) << "element " << e;
  }
}

// Over one rank (trainer_cuda --strategy=zero1 --nproc=1, check.sh's
// sync1_zero1) the shard buffer is the gradient buffer element for element
// and the update pieces are the tensors: the norm's kernel and AdamW's
// launches see what single's do, so the GPU run equals single bit for bit.
// (Shards laid out in launch order, the reverse, would not.)
TEST(Zero1, OverOneRankTheShardIsTheGradientBuffer) {
  const TrainConfig config = RanksConfig(TrainConfig::zero1, 4);
  const SyncPlan plan = PlanFor(config, 1);
  ASSERT_GT(plan.buckets.size(), 2u);
  const std::vector<int64_t> offsets = ShardOffsets(plan, 0);
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    EXPECT_EQ(offsets[b], plan.buckets[b].offset) << "bucket " << b;
  }
  const ParameterLayout layout = ParameterLayout::ForGpt(ModelShapeOf(config));
  std::vector<DeviceTensor> tensors;
  for (const TensorSlot& slot : layout.tensors()) {
    tensors.push_back({slot.offset, slot.numel, slot.weight_decay});
  }
  const std::vector<UpdatePiece> pieces = ShardPieces(plan, 0, tensors);
  ASSERT_EQ(pieces.size(), tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    EXPECT_EQ(pieces[t], (UpdatePiece{tensors[t].offset, tensors[t].offset, tensors[t].numel,
                                      tensors[t].weight_decay}))
        << "tensor " << t;
  }
}

// The negative case of the sharding: one boundary moved by one element is
// refused by the run (CheckShardPlan, before any step) and would give an
// element to another rank than the CPU trainer's zero1 (whose checkpoint
// placements record the owners).
TEST(Zero1, AWrongShardBoundaryIsCaught) {
  const TrainConfig config = RanksConfig(TrainConfig::zero1, 2);
  SyncPlan plan = PlanFor(config, 2);
  ASSERT_TRUE(CheckShardPlan(plan, plan.numel).ok());
  ASSERT_GT(plan.buckets.size(), 2u);
  SyncPlan moved = plan;
  PlanBucket& bucket = moved.buckets[1];
  ++bucket.counts[0];
  --bucket.counts[1];
  const absl::Status refused = CheckShardPlan(moved, moved.numel);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("bucket 1 "), std::string::npos) << refused;
  const int64_t boundary = bucket.offset + plan.buckets[1].counts[0];
  EXPECT_EQ(plan.OwnerOf(boundary), 1);
  EXPECT_EQ(moved.OwnerOf(boundary), 0);
  // A bucket left out: the buffer is not covered.
  SyncPlan missing = plan;
  missing.buckets.erase(missing.buckets.begin() + 2);
  EXPECT_FALSE(CheckShardPlan(missing, missing.numel).ok());
}

// "" when, in every step of `log`, each bucket was launched after its last
// gradient was final and before backward's next point; otherwise the first
// bucket that was not.
std::string OverlapProblem(const std::vector<std::string>& log, const SyncPlan& plan) {
  std::vector<int> bucket_of;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    for (int t : plan.buckets[b].tensors) {
      if (t >= static_cast<int>(bucket_of.size())) bucket_of.resize(t + 1, -1);
      bucket_of[t] = static_cast<int>(b);
    }
  }
  const int n = static_cast<int>(plan.buckets.size());
  std::vector<int> missing;
  int next = n;
  int step = 0;
  for (const std::string& entry : log) {
    const std::vector<std::string> words = absl::StrSplit(entry, ' ');
    if (words[0] == "launch") {
      if (next >= n) return absl::StrCat("step ", step, ": a launch past the last bucket");
      if (missing[next] != 0) {
        return absl::StrCat("step ", step, ": bucket ", next, " launched before its gradients");
      }
      ++next;
      continue;
    }
    int point = -1;
    if (!absl::SimpleAtoi(words[1], &point)) return "bad entry " + entry;
    if (point == 0) {
      if (next != n) return absl::StrCat("step ", step, ": ", n - next, " buckets never launched");
      ++step;
      missing.clear();
      for (const PlanBucket& bucket : plan.buckets) missing.push_back(bucket.tensors.size());
      next = 0;
    } else if (next < n && missing[next] == 0) {
      return absl::StrCat("step ", step, ": bucket ", next,
                          " was complete before backward's point ", point,
                          " but not launched until after it");
    }
    for (size_t w = 2; w < words.size(); ++w) {
      int t = 0;
      if (!absl::SimpleAtoi(words[w], &t)) return "bad entry " + entry;
      --missing[bucket_of[t]];
    }
  }
  if (next != n) return absl::StrCat("step ", step, ": ", n - next, " buckets never launched");
  return "";
}

// The buckets launch during backward, each at the first point its last
// gradient is final, so they interleave with backward's later points; ddp
// so overlapped equals one rank bit for bit. The negative case: the sync
// after backward (--ddp_overlap=false) fails the ordering check with the
// same numbers.
TEST(Overlap, BucketsLaunchAsSoonAsTheirLastGradientIsFinal) {
  const SyncPlan plan = PlanFor(RanksConfig(TrainConfig::ddp, 2), 2);
  ASSERT_GT(plan.buckets.size(), 8u);
  for (const auto strategy : {TrainConfig::ddp, TrainConfig::zero1}) {
    SCOPED_TRACE(static_cast<int>(strategy));
    const std::vector<RankOutcome> overlapped = RunRanks(RanksConfig(strategy, 2), 2);
    TrainConfig after_config = RanksConfig(strategy, 2);
    after_config.set_ddp_launch_after_backward(true);
    const std::vector<RankOutcome> after = RunRanks(after_config, 2);
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(absl::StrCat("rank ", r));
      EXPECT_EQ(OverlapProblem(overlapped[r].seen.log, plan), "");
      // Launches before backward's last point: every bucket but those
      // holding the embeddings.
      int early = 0;
      for (const PlanBucket& bucket : plan.buckets) {
        early += std::find_if(bucket.tensors.begin(), bucket.tensors.end(), [](int t) {
                   return t == kTokenEmbeddingIndex || t == kPositionEmbeddingIndex;
                 }) == bucket.tensors.end();
      }
      int before_last = 0;
      for (const std::string& entry : overlapped[r].seen.log) {
        if (entry.rfind("point 7", 0) == 0) break;
        before_last += entry == "launch";
      }
      EXPECT_EQ(before_last, early);  // in the first step
      EXPECT_GT(early, 5);
      EXPECT_NE(OverlapProblem(after[r].seen.log, plan), "");
      ExpectBitForBit(after[r], overlapped[r], /*norms=*/true);
      ExpectBitForBit(overlapped[r], Alone(), /*norms=*/true);
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace mtb
