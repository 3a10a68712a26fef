#include "trainer/run/gradient_reduction.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "trainer/config/config.h"
#include "trainer/exact/exact.h"

namespace mtb {
namespace {

class FloatReduction : public GradientReduction {
 public:
  FloatReduction(const TrainConfig& config, const RankInfo& rank,
                 Strategy& strategy, MemoryMarks* marks)
      : strategy_(strategy), marks_(marks) {
    for (int m = 0; m < config.grad_accum(); ++m) {
      pieces_.push_back({m, FirstSampleOf(m, rank, config.batch_size()),
                         config.batch_size(),
                         static_cast<double>(config.grad_accum())});
    }
  }
  const std::vector<BackwardPiece>& Pieces() const override { return pieces_; }
  absl::Status BeforeBackward(const BackwardPiece& piece) override {
    return strategy_.BeforeBackward(
        piece.index, static_cast<int>(pieces_.size()), ReductionMode::kFloat);
  }
  absl::StatusOr<Synchronised> Synchronise(int64_t, StepRecord&) override {
    RETURN_IF_ERROR(strategy_.AfterBackward(ReductionMode::kFloat));
    if (marks_ != nullptr) marks_->Mark("gradients synchronised", -1);
    Synchronised done;
    ASSIGN_OR_RETURN(done.grad_norm, strategy_.GlobalGradNorm());
    return done;
  }
  std::vector<double> LossesToGather(
      const std::vector<double>& piece_losses) const override {
    double mean = 0;
    for (double loss : piece_losses) {
      mean += loss / static_cast<double>(piece_losses.size());
    }
    return {mean};
  }
  double StepLoss(const StepScalars::Gathered& all) const override {
    double sum = 0;
    for (int r = 0; r < all.ranks(); ++r) sum += all.One(r, "loss");
    return sum / all.ranks();
  }

 private:
  Strategy& strategy_;
  MemoryMarks* marks_;
  std::vector<BackwardPiece> pieces_;
};

class ExactReduction : public GradientReduction {
 public:
  ExactReduction(const TrainConfig& config, const RankInfo& rank,
                 Strategy& strategy, const ParameterStore& store)
      : config_(config),
        rank_(rank),
        strategy_(strategy),
        store_(store),
        reducer_(store,
                 static_cast<int64_t>(rank.world_size) * config.grad_accum() *
                     config.batch_size() / config.exact_chunk(),
                 config.testonly_exact_grid_finer_bits()) {
    const int64_t chunk = config.exact_chunk();
    const int per_micro = static_cast<int>(config.batch_size() / chunk);
    for (int m = 0; m < config.grad_accum(); ++m) {
      const int64_t first = FirstSampleOf(m, rank, config.batch_size());
      for (int c = 0; c < per_micro; ++c) {
        pieces_.push_back({m * per_micro + c, first + c * chunk, chunk, 1.0});
      }
    }
  }
  const std::vector<BackwardPiece>& Pieces() const override { return pieces_; }
  void Begin() override { reducer_.BeginAttempt(/*coarsen=*/attempt_ > 0); }
  absl::Status BeforeBackward(const BackwardPiece& piece) override {
    return strategy_.BeforeBackward(
        piece.index, static_cast<int>(pieces_.size()), ReductionMode::kExact);
  }
  // Converted as soon as the chunk is done; .grad zeroed for the next.
  void AfterBackward(const BackwardPiece&) override { reducer_.AddChunk(); }
  absl::StatusOr<Synchronised> Synchronise(int64_t step,
                                           StepRecord& record) override;
  std::vector<double> LossesToGather(
      const std::vector<double>& piece_losses) const override {
    return piece_losses;
  }
  // The chunks' losses summed in global chunk order: the same on every
  // layout.
  double StepLoss(const StepScalars::Gathered& all) const override;
  void RecordTraffic(const StepCommunication& strategy_figures,
                     StepRecord& record) const override {
    GradientReduction::RecordTraffic(strategy_figures, record);
    // The int64 reductions are the reduction's, not the strategy's.
    record.set_comm_wait_ms(traffic_.wait_ms);
    record.set_grad_bytes_sent(traffic_.bytes_sent);
    record.set_expected_grad_bytes(traffic_.expected_bytes);
    record.set_grad_syncs(1);
  }

 private:
  const TrainConfig& config_;
  RankInfo rank_;
  Strategy& strategy_;
  const ParameterStore& store_;
  ExactReducer reducer_;
  std::vector<BackwardPiece> pieces_;
  int attempt_ = 0;
  ExactTraffic traffic_;
};

absl::StatusOr<Synchronised> ExactReduction::Synchronise(int64_t step,
                                                         StepRecord& record) {
  collective::Communicator* communicator = strategy_.communicator();
  RETURN_IF_ERROR(strategy_.AfterBackward(ReductionMode::kExact));
  ASSIGN_OR_RETURN(const ExactReducer::Verdict verdict,
                   reducer_.Decide(communicator));
  Synchronised done;
  if (!verdict.finite) {
    // Nothing is reduced: the step stops on the NaN norm (every rank).
    attempt_ = 0;
    done.grad_norm = std::numeric_limits<double>::quiet_NaN();
    return done;
  }
  if (!verdict.overflowed.empty()) {
    const std::string what =
        verdict.Describe(store_, reducer_.global_max_abs());
    if (attempt_ > 0) {
      return absl::InternalError(absl::StrCat(
          "step ", step, ": exact mode: the chunk gradients of ", what,
          " overflowed the coarser grid of the redo (their chunks are "
          "deterministic, so this is a bug)"));
    }
    if (rank_.rank == 0) {
      LOG(WARNING) << "step " << step << ": exact mode: chunk gradients of "
                   << what << " exceed the default grid (max-abs 2^"
                   << ExactReducer::kDefaultMaxAbsLog2 -
                          config_.testonly_exact_grid_finer_bits()
                   << "); redoing the step on a coarser grid for them";
    }
    record.set_exact_redos(++attempt_);
    done.redo = true;
    return done;
  }
  attempt_ = 0;
  const std::vector<ExactGroup> groups = strategy_.ExactGroups();
  ASSIGN_OR_RETURN(traffic_, reducer_.Reduce(groups, communicator));
  ASSIGN_OR_RETURN(done.grad_norm, reducer_.Norm(groups, communicator));
  return done;
}

double ExactReduction::StepLoss(const StepScalars::Gathered& all) const {
  std::vector<std::pair<int64_t, double>> by_chunk;  // (global chunk, loss)
  for (int r = 0; r < all.ranks(); ++r) {
    const std::vector<double> losses = all.Of(r, "loss");
    for (size_t i = 0; i < losses.size(); ++i) {
      by_chunk.emplace_back(
          GlobalChunkOf(static_cast<int>(i), r, rank_.world_size,
                        config_.batch_size(), config_.exact_chunk()),
          losses[i]);
    }
  }
  std::sort(by_chunk.begin(), by_chunk.end());
  double sum = 0;
  for (const auto& [chunk, value] : by_chunk) sum += value;
  return sum / static_cast<double>(by_chunk.size());
}

}  // namespace

int64_t FirstSampleOf(int micro_batch, const RankInfo& rank,
                      int64_t batch_size) {
  return (static_cast<int64_t>(micro_batch) * rank.data_ranks() +
          rank.data_rank()) *
         batch_size;
}

void GradientReduction::RecordTraffic(const StepCommunication& c,
                                      StepRecord& record) const {
  record.set_comm_wait_ms(c.wait_ms);
  record.set_grad_bytes_sent(c.bytes_sent);
  record.set_expected_grad_bytes(c.expected_bytes);
  record.set_grad_syncs(c.syncs);
  record.set_param_gather_bytes_sent(c.gather_bytes_sent);
  record.set_expected_param_gather_bytes(c.expected_gather_bytes);
  record.set_param_gathers(c.gathers);
  record.set_param_gather_in_flight_ms(c.gather_in_flight_ms);
  record.set_param_gather_wait_ms(c.gather_wait_ms);
  record.set_param_gather_hidden_ms(c.gather_hidden_ms);
  record.set_tp_bytes_sent(c.tp_bytes_sent);
  record.set_expected_tp_bytes(c.expected_tp_bytes);
}

std::unique_ptr<GradientReduction> MakeGradientReduction(
    const TrainConfig& config, const RankInfo& rank, Strategy& strategy,
    const ParameterStore& store, MemoryMarks* marks) {
  if (IsExact(config)) {
    return std::make_unique<ExactReduction>(config, rank, strategy, store);
  }
  return std::make_unique<FloatReduction>(config, rank, strategy, marks);
}

}  // namespace mtb
