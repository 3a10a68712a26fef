// The shared multi-rank test helpers (ranks_test_util.h).
#include "trainer/cuda/ranks_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/collective/communicator.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"
#include "trainer/cuda/gpt_tensors.h"
#include "trainer/data/samples.h"
#include "trainer/model/model_shape.h"
#include "trainer/strategy/buckets.h"

namespace mtb {
namespace cuda {

// Several buckets: 470,800 elements (1.9 MB; the first bucket holds 1 MiB,
// the later ones 0.05 MB, about one large weight each), sizes that 3 and 4
// do not always divide.
TrainConfig RanksConfig(TrainConfig::Strategy strategy, int64_t batch_size) {
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
  config.set_beta1(0.9);
  config.set_beta2(0.999);
  config.set_eps(1e-8);
  config.set_steps(3);
  config.set_timing_warmup_steps(0);
  config.set_seed(5);
  return config;
}

namespace {

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
          const AdamWSettings& adamw, Seen* seen, bool drop_loaded_state)
      : dims_(dims), adamw_(adamw), seen_(seen), drop_loaded_state_(drop_loaded_state),
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
    if (drop_loaded_state_) return;
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
  bool drop_loaded_state_;
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

}  // namespace

GptCudaFactory StandInFactory(const TrainConfig& config, Seen* seen, bool drop_loaded_state) {
  AdamWSettings adamw;
  adamw.beta1 = config.beta1();
  adamw.beta2 = config.beta2();
  adamw.eps = config.eps();
  adamw.weight_decay = config.weight_decay();
  return [adamw, seen, drop_loaded_state](const GptDims& dims, const ParameterLayout& layout,
                                          const float* parameters, std::string*) {
    return std::unique_ptr<GptCuda>(
        std::make_unique<StandIn>(dims, layout, parameters, adamw, seen, drop_loaded_state));
  };
}

RankOutcome RunAlone(const TrainConfig& config, const checkpoint::CheckpointPlan& plan,
                     bool drop_loaded_state) {
  RankOutcome out;
  const auto samples = MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len());
  out.result = RunCudaTraining(config, *samples, DeviceInfo{"stand-in"},
                               StandInFactory(config, &out.seen, drop_loaded_state), plan);
  return out;
}

std::vector<RankOutcome> RunRanks(const TrainConfig& config, int world,
                                  const checkpoint::CheckpointPlan& plan,
                                  bool drop_loaded_state) {
  std::vector<RankOutcome> outcomes(world);
  ThreadExchange exchange(world);
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
    ranks.exchange = exchange.For(c.rank());
    const auto samples =
        MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len());
    out.result = RunCudaTraining(config, *samples, DeviceInfo{"stand-in"},
                                 StandInFactory(config, &out.seen, drop_loaded_state), plan,
                                 ranks);
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

checkpoint::CheckpointPlan CheckpointPlanFor(const std::string& dir, int64_t save_every,
                                             const std::string& resume, int world,
                                             TrainConfig* config) {
  checkpoint::CheckpointOptions options;
  options.dir = dir;
  options.save_every = save_every;
  options.resume = resume;
  absl::StatusOr<checkpoint::CheckpointPlan> plan = checkpoint::PlanCheckpoints(
      options, config, world, [](absl::string_view) { return false; });
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : checkpoint::CheckpointPlan();
}

}  // namespace cuda
}  // namespace mtb
