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
#include <mutex>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "common/collective/communicator.h"
#include "common/collective/test_util.h"
#include "common/collective/traffic.h"
#include "gtest/gtest.h"
#include "trainer/cuda/gpt_tensors.h"
#include "trainer/cuda/layout.h"
#include "trainer/cuda/run.h"
#include "trainer/data/samples.h"
#include "trainer/model/model_shape.h"
#include "trainer/strategy/buckets.h"

namespace mtb {
namespace cuda {
namespace {

// Several buckets: 470,800 elements (1.9 MB; the first bucket holds 1 MiB,
// the later ones 0.05 MB, about one large weight each), sizes that 3 and 4
// do not always divide.
TrainConfig Config(TrainConfig::Strategy strategy, int64_t batch_size) {
  TrainConfig config;
  config.set_vocab_size(37);
  config.set_d_model(80);
  config.set_n_layers(6);
  config.set_n_heads(4);
  config.set_seq_len(8);
  config.set_batch_size(batch_size);
  config.set_precision(TrainConfig::fp32);
  config.set_strategy(strategy);
  config.set_bucket_cap_mb(0.05);
  config.set_data("synthetic");
  config.set_lr(1e-2);
  config.set_min_lr(1e-3);
  config.set_lr_schedule(TrainConfig::cosine);
  config.set_lr_warmup_steps(1);
  config.set_lr_decay_steps(3);
  config.set_grad_accum(1);
  config.set_max_grad_norm(1.0);  // the norms are ~100: clipping is active
  config.set_weight_decay(0.1);
  config.set_steps(3);
  config.set_timing_warmup_steps(0);
  config.set_seed(5);
  return config;
}

// What a rank's stand-in saw, for the checks.
struct Seen {
  std::vector<float> parameters;   // at the end of the run
  std::vector<UpdatePiece> pieces;  // the last sharded update's
  // "point k t1 t2 ..." (backward's point k readied tensors t1, t2, ...)
  // and "launch" (the next bucket's collective), in order.
  std::vector<std::string> log;
};

// The GPU model's multi-rank behaviour on the host: backward readies the
// gradients at the same points as gpt_cuda.cu (the final LayerNorm, each
// block from the last, the embeddings) and tells the hook; the sharded
// update is the same elementwise AdamW on pieces. The gradient of element i
// is the mean over the rows of (token + i) mod 4, negated where the
// parameter is negative (so a parameter that is not gathered changes later
// gradients).
class StandIn : public GptCuda, public ShardedDevice {
 public:
  StandIn(const GptDims& dims, const ParameterLayout& layout, const float* initial,
          const AdamWSettings& adamw, Seen* seen)
      : dims_(dims), adamw_(adamw), seen_(seen),
        p_(initial, initial + layout.total()), m_(layout.total()), v_(layout.total()),
        g_(layout.total()), decay_(layout.total()) {
    seen_->log.clear();
    for (const TensorSlot& slot : layout.tensors()) {
      tensors_.push_back({slot.offset, slot.numel});
      std::fill(decay_.begin() + slot.offset, decay_.begin() + slot.offset + slot.numel,
                slot.weight_decay);
    }
  }

  StepStats ForwardBackward(const int32_t* inputs, const int32_t*) override {
    const int64_t rows = dims_.batch_size * dims_.seq_len;
    auto produce = [&](int point, const std::vector<int>& tensors) {
      for (int t : tensors) {
        for (int64_t i = tensors_[t].first; i < tensors_[t].first + tensors_[t].second; ++i) {
          float sum = 0;
          for (int64_t r = 0; r < rows; ++r) sum += static_cast<float>((inputs[r] + i) % 4);
          g_[i] = (p_[i] < 0 ? -sum : sum) / static_cast<float>(rows);
        }
      }
      std::string entry = absl::StrCat("point ", point);
      for (int t : tensors) absl::StrAppend(&entry, " ", t);
      seen_->log.push_back(entry);
      if (hook_ != nullptr) hook_->Ready(tensors, nullptr);
    };
    const int64_t layers = dims_.n_layers;
    produce(0, {FinalLnBiasIndex(layers), FinalLnWeightIndex(layers)});
    for (int64_t l = layers - 1; l >= 0; --l) {
      std::vector<int> block;
      for (int t = kTensorsPerBlock - 1; t >= 0; --t) block.push_back(BlockTensorIndex(l, t));
      produce(static_cast<int>(layers - l), block);
    }
    produce(static_cast<int>(layers + 1), {kPositionEmbeddingIndex, kTokenEmbeddingIndex});
    StepStats stats;
    double loss = 0;
    for (int64_t r = 0; r < rows; ++r) loss += inputs[r] % 8;
    stats.loss = loss / static_cast<double>(rows);
    return stats;
  }
  float* gradients() override { return g_.data(); }
  void Update(int64_t step, double lr, double max_grad_norm, StepStats* stats) override {
    stats->grad_norm = std::sqrt(SquaredNorm(g_.data(), static_cast<int64_t>(g_.size())));
    double scale = 1;
    stats->clipped = max_grad_norm > 0 && stats->grad_norm > max_grad_norm;
    if (stats->clipped) scale = max_grad_norm / (stats->grad_norm + 1e-6);
    for (size_t i = 0; i < p_.size(); ++i) UpdateOne(i, g_[i], step, lr, scale);
  }
  void CopyParametersToHost(float* host) override {
    std::memcpy(host, p_.data(), p_.size() * sizeof(float));
  }
  void CopyStateToHost(float* p, float* m, float* v) override {
    std::memcpy(p, p_.data(), p_.size() * sizeof(float));
    std::memcpy(m, m_.data(), m_.size() * sizeof(float));
    std::memcpy(v, v_.data(), v_.size() * sizeof(float));
  }
  void LoadState(const float* p, const float* m, const float* v) override {
    std::memcpy(p_.data(), p, p_.size() * sizeof(float));
    std::memcpy(m_.data(), m, m_.size() * sizeof(float));
    std::memcpy(v_.data(), v, v_.size() * sizeof(float));
  }
  int64_t DeviceBytes() const override { return 0; }
  // The run owns the model: the parameters it ends with (after zero1's last
  // gather) are kept here.
  ~StandIn() override { seen_->parameters = p_; }
  void SetGradientReadyHook(GradientReadyHook* hook) override { hook_ = hook; }
  ShardedDevice* sharded() override { return this; }

  // ShardedDevice.
  float* parameters() override { return p_.data(); }
  float* AllocateShardGradients(int64_t numel, std::string*) override {
    shard_.assign(numel, 0);
    return shard_.data();
  }
  double SquaredNorm(const float* data, int64_t numel) override {
    double sum = 0;
    for (int64_t i = 0; i < numel; ++i) sum += static_cast<double>(data[i]) * data[i];
    return sum;
  }
  double UpdatePieces(const std::vector<UpdatePiece>& pieces, const float* shard, int64_t step,
                      double lr, double grad_scale) override {
    for (const UpdatePiece& piece : pieces) {
      EXPECT_EQ(piece.weight_decay, static_cast<bool>(decay_[piece.offset]));
      for (int64_t e = 0; e < piece.numel; ++e) {
        UpdateOne(piece.offset + e, shard[piece.shard_offset + e], step, lr, grad_scale);
      }
    }
    seen_->pieces = pieces;
    return 0;
  }

 private:
  // AdamW on element i, as gpt_cuda.cu's kernel (float).
  void UpdateOne(size_t i, float grad, int64_t step, double lr, double scale) {
    const float g = grad * static_cast<float>(scale);
    const float b1 = static_cast<float>(adamw_.beta1), b2 = static_cast<float>(adamw_.beta2);
    const double bc1 = 1 - std::pow(adamw_.beta1, static_cast<double>(step));
    const double bc2 = 1 - std::pow(adamw_.beta2, static_cast<double>(step));
    const float decay = static_cast<float>(1 - lr * (decay_[i] ? adamw_.weight_decay : 0.0));
    m_[i] = b1 * m_[i] + (1 - b1) * g;
    v_[i] = b2 * v_[i] + (1 - b2) * g * g;
    p_[i] = p_[i] * decay - static_cast<float>(lr / bc1) * m_[i] /
                                (std::sqrt(v_[i]) / static_cast<float>(std::sqrt(bc2)) +
                                 static_cast<float>(adamw_.eps));
  }

  GptDims dims_;
  AdamWSettings adamw_;
  Seen* seen_;
  std::vector<std::pair<int64_t, int64_t>> tensors_;  // offset, numel
  std::vector<float> p_, m_, v_, g_, shard_;
  std::vector<char> decay_;
  GradientReadyHook* hook_ = nullptr;
};

// The plan's collectives on host buffers over common/collective, each call's
// shard counts recorded.
class HostCollectives final : public SyncCollectives {
 public:
  HostCollectives(collective::Communicator* c, std::vector<std::string>* log)
      : c_(c), log_(log) {}
  int rank() const override { return c_->rank(); }
  absl::Status AllReduceAverage(float* data, int64_t numel) override {
    calls.push_back("all_reduce");
    log_->push_back("launch");
    return c_->AllReduce(Floats(data, numel), collective::ReduceOp::kAvg);
  }
  absl::Status ReduceScatterAverage(const float* bucket, float* shard,
                                    const std::vector<int64_t>& counts) override {
    calls.push_back("reduce_scatter");
    log_->push_back("launch");
    scatter_counts.push_back(counts);
    return c_->ReduceScatterV(Floats(const_cast<float*>(bucket), Sum(counts)),
                              Floats(shard, counts[rank()]), counts,
                              collective::ReduceOp::kAvg);
  }
  absl::Status AllGatherInPlace(float* bucket, const std::vector<int64_t>& counts) override {
    calls.push_back("all_gather");
    gather_counts.push_back(counts);
    int64_t start = 0;
    for (int p = 0; p < rank(); ++p) start += counts[p];
    return c_->AllGatherV(Floats(bucket + start, counts[rank()]), Floats(bucket, Sum(counts)),
                          counts);
  }
  std::vector<std::string> calls;
  std::vector<std::vector<int64_t>> scatter_counts, gather_counts;

 private:
  static at::Tensor Floats(float* data, int64_t numel) {
    return at::from_blob(data, {numel}, at::TensorOptions().dtype(at::kFloat));
  }
  static int64_t Sum(const std::vector<int64_t>& counts) {
    int64_t sum = 0;
    for (int64_t c : counts) sum += c;
    return sum;
  }
  collective::Communicator* c_;
  std::vector<std::string>* log_;  // the rank's ordering log: "launch"
};

double ReduceDouble(collective::Communicator& c, double value, collective::ReduceOp op) {
  at::Tensor t = at::full({1}, value, at::TensorOptions().dtype(at::kDouble));
  EXPECT_TRUE(c.AllReduce(t, op).ok());
  return t.item<double>();
}

struct RankOutcome {
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  Seen seen;
  std::vector<std::string> calls;
  std::vector<std::vector<int64_t>> scatter_counts, gather_counts;
};

GptCudaFactory Factory(const TrainConfig& config, Seen* seen) {
  AdamWSettings adamw;
  adamw.beta1 = config.beta1();
  adamw.beta2 = config.beta2();
  adamw.eps = config.eps();
  adamw.weight_decay = config.weight_decay();
  return [adamw, seen](const GptDims& dims, const ParameterLayout& layout,
                       const float* parameters, std::string*) {
    return std::unique_ptr<GptCuda>(
        std::make_unique<StandIn>(dims, layout, parameters, adamw, seen));
  };
}

// One rank alone (single): the reference.
RankOutcome RunAlone(const TrainConfig& config) {
  RankOutcome out;
  const auto samples = MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len());
  out.result = RunCudaTraining(config, *samples, DeviceInfo{"stand-in"},
                               Factory(config, &out.seen));
  return out;
}

// `world` rank threads, B = config's batch each.
std::vector<RankOutcome> RunRanks(const TrainConfig& config, int world) {
  std::vector<RankOutcome> outcomes(world);
  const absl::Status ran = collective::RunRanksAsThreads(world, [&](collective::Communicator& c) {
    RankOutcome& out = outcomes[c.rank()];
    HostCollectives collectives(&c, &out.seen.log);
    CudaRanks ranks;
    ranks.rank = c.rank();
    ranks.world_size = world;
    ranks.collectives = &collectives;
    ranks.average_loss = [&](double v) { return ReduceDouble(c, v, collective::ReduceOp::kAvg); };
    ranks.sum_over_ranks = [&](double v) {
      return ReduceDouble(c, v, collective::ReduceOp::kSum);
    };
    const auto samples =
        MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len());
    out.result = RunCudaTraining(config, *samples, DeviceInfo{"stand-in"},
                                 Factory(config, &out.seen), checkpoint::CheckpointPlan(), ranks);
    out.calls = collectives.calls;
    out.scatter_counts = collectives.scatter_counts;
    out.gather_counts = collectives.gather_counts;
  });
  EXPECT_TRUE(ran.ok()) << ran;
  return outcomes;
}

std::vector<double> Losses(const TrainResult& r) {
  std::vector<double> v;
  for (const StepRecord& s : r.runs(0).steps()) v.push_back(s.loss());
  return v;
}
std::vector<double> Norms(const TrainResult& r) {
  std::vector<double> v;
  for (const StepRecord& s : r.runs(0).steps()) v.push_back(s.grad_norm());
  return v;
}
std::vector<bool> Clipped(const TrainResult& r) {
  std::vector<bool> v;
  for (const StepRecord& s : r.runs(0).steps()) v.push_back(s.clipped());
  return v;
}

SyncPlan PlanFor(const TrainConfig& config, int world) {
  const ParameterLayout layout = ParameterLayout::ForGpt(ModelShapeOf(config));
  std::vector<int64_t> numels;
  for (const TensorSlot& slot : layout.tensors()) numels.push_back(slot.numel);
  return MakeSyncPlan(numels, world, kFirstBucketBytes, BucketCapBytes(config.bucket_cap_mb()));
}


// The stand-in's gradients, norms and update: what every rank compares to.
const RankOutcome& Alone() {
  static const RankOutcome* const alone =
      new RankOutcome(RunAlone(Config(TrainConfig::single, /*batch_size=*/4)));
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
    const std::vector<RankOutcome> ranks = RunRanks(Config(TrainConfig::zero1, 4 / world), world);
    for (const RankOutcome& rank : ranks) ExpectBitForBit(rank, Alone(), /*norms=*/true);
  }
}

// Over 3 ranks (uneven shards): zero1 equals ddp in the parameters and
// losses bit for bit, the norm within 2 (N - 1) u relative (file comment);
// each rank updates exactly its shards of the CPU trainer's plan and moves
// the bytes the CPU trainer's zero1 counts for them.
TEST(Zero1, ThreeRanksOwnTheCpuTrainersShardsAndMoveTheirBytes) {
  TrainConfig zero1 = Config(TrainConfig::zero1, 1);
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
    int64_t shard_at = 0;
    for (const UpdatePiece& piece : sharded[r].seen.pieces) {
      EXPECT_EQ(piece.shard_offset, shard_at);
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

// The negative case of the sharding: one boundary moved by one element is
// refused by the run (CheckShardPlan, before any step) and would give an
// element to another rank than the CPU trainer's zero1 (whose checkpoint
// placements record the owners).
TEST(Zero1, AWrongShardBoundaryIsCaught) {
  const TrainConfig config = Config(TrainConfig::zero1, 2);
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
  const SyncPlan plan = PlanFor(Config(TrainConfig::ddp, 2), 2);
  ASSERT_GT(plan.buckets.size(), 8u);
  for (const auto strategy : {TrainConfig::ddp, TrainConfig::zero1}) {
    SCOPED_TRACE(static_cast<int>(strategy));
    const std::vector<RankOutcome> overlapped = RunRanks(Config(strategy, 2), 2);
    TrainConfig after_config = Config(strategy, 2);
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
