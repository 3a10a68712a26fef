// FSDP (ZeRO-3): every unit of the parameter store (the
// root — embeddings, final LayerNorm, tied head — and one per block) is kept
// only as this rank's shard of its parameters, gradient and AdamW state (16
// bytes per element, 16 Psi / N at rest). The model asks for a unit's
// parameters just before its forward (trainer/model/unit_hooks.h: this strategy is
// the model's parameter provider); fsdp.cc explains the mechanism and its
// vocabulary.
//
// Shard ownership, for checkpoints: rank r owns, of every unit u, the flat
// layout elements [units[u].offset + shard_offset(u, r), + counts_u[r]), with
// counts_u = EvenCounts(units[u].numel, n) (trainer/model/state_pieces.h: the
// first numel % n ranks one element more) — as zero's pieces, with units in
// place of buckets (shard_ranges(), and the checkpoint pieces below).
//
// Collective contract: as ZeroStrategy (zero.h): every rank constructs its
// FsdpStrategy over its rank of one Communicator and runs the same loop;
// Setup checks the ranks built the same model and broadcasts rank 0's
// parameters before sharding them. Gathers are issued from the model's
// forward and from gradient hooks, reduce-scatters from gradient-accumulator
// hooks, all in an order fixed by the model, so every rank issues the same
// collectives in the same order.
//
// Threading: forward, backward and every call on one thread.
#ifndef MTB_TRAINER_STRATEGY_FSDP_H_
#define MTB_TRAINER_STRATEGY_FSDP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/collective/communicator.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/bucket_engine.h"
#include "trainer/model/unit_hooks.h"

namespace mtb {

struct FsdpOptions {
  // Free a block unit's gathered parameters after its forward and gather it
  // again before its backward (ZeRO-3, the default); false keeps it gathered
  // until its backward (ZeRO-2-like: 2 instead of 3 unit-sized transfers per
  // micro-batch, every block's parameters held at the end of the forward).
  bool reshard_after_forward = true;
  // Issue the next unit's all-gather while the current one computes (forward:
  // the next block; backward: the previous one), at most one unit ahead.
  bool prefetch = false;
  // kEvery (what --grad_sync=auto means for fsdp): each micro-batch's unit
  // gradients are reduce-scattered as its backward finishes; kLast keeps
  // every unit's full gradient across micro-batches and reduce-scatters once.
  GradSync grad_sync = GradSync::kEvery;
  // Test aid (--testonly_sync_fault=keep_gathered_units, the memory check's
  // negative case): a gathered unit's storage is never freed (it is gathered
  // into again whenever it would have been; the numbers do not change).
  bool testonly_keep_gathered_units = false;
};

// The options --reshard_after_forward, --fsdp_prefetch and the resolved
// --grad_sync ask for.
FsdpOptions FsdpOptionsFromConfig(bool reshard_after_forward, bool prefetch,
                                  const std::string& grad_sync);

class FsdpStrategy final : public Strategy, public UnitHooks {
 public:
  // `communicator`: this rank's membership, or nullptr for one rank (then
  // every shard is the whole unit: gathers and reduce-scatters are local
  // copies). Must outlive the strategy.
  FsdpStrategy(collective::Communicator* communicator,
               const FsdpOptions& options);
  ~FsdpStrategy() override;
  FsdpStrategy(const FsdpStrategy&) = delete;
  FsdpStrategy& operator=(const FsdpStrategy&) = delete;

  std::string name() const { return "fsdp"; }
  std::string Describe() const;
  StrategySummary Summary() const override {
    return {name(), Describe(), Buckets()};
  }

  // Collective: checks the ranks built the same model, broadcasts rank 0's
  // parameters, splits the store into per-unit buffers (each then freed),
  // keeps this rank's shard of every unit and registers the gradient hooks.
  absl::Status Setup(ParameterStore& store,
                     const AdamWOptions& optimizer) override;
  // Local: starts the step at rest (every unit freed, no full gradient) and
  // its communication figures.
  void ZeroGradients() override;
  absl::Status BeforeBackward(int micro_batch, int micro_batches);
  absl::Status BeforeBackward(int piece, int pieces,
                              ReductionMode mode) override {
    return mode == ReductionMode::kExact ? BeforeLocalBackward(piece, pieces)
                                         : BeforeBackward(piece, pieces);
  }
  // Waits for every reduce-scatter and frees the root: at rest again, this
  // rank's gradient shards complete. kFailedPrecondition, naming the
  // parameter, when one got no gradient.
  absl::Status AfterBackward();
  absl::Status AfterBackward(ReductionMode mode) override {
    return mode == ReductionMode::kExact ? AfterLocalBackwards()
                                         : AfterBackward();
  }
  StepCommunication TakeStepCommunication() override;
  // The units in reduce-scatter order (blocks last to first, then the root).
  std::vector<BucketSummary> Buckets() const;
  // Collective: the fp64 sum of squares of this rank's gradient shards,
  // summed over ranks.
  absl::StatusOr<double> GlobalGradNorm() override;
  absl::Status ScaleGradients(double factor);
  // AdamW on this rank's shards (no gather: the next forward gathers).
  absl::Status OptimizerStep(double lr, double gradient_scale) override;
  // Shards, gathered units, full gradients held, reduce-scatter outputs.
  HeldMemory Held() const override;
  // Checkpoint state (trainer/run/strategy.h): this rank's shard of every unit,
  // parameters and AdamW state, split per parameter (the step from rank 0);
  // loading writes the same shards.
  std::vector<StatePiece> CheckpointPiecesToSave() const;
  std::vector<StatePiece> CheckpointPiecesToLoad();
  std::vector<StatePiece> CheckpointPieces(CheckpointUse use) override {
    return use == CheckpointUse::kSave ? CheckpointPiecesToSave()
                                       : CheckpointPiecesToLoad();
  }
  // Local: frees any unit gathered with the values before the load.
  absl::Status FinishCheckpointLoad() override;
  UnitHooks* unit_hooks() override { return this; }
  // Exact mode (strategy.h): a backward that reduce-scatters nothing (every
  // unit's full gradient is kept until the step ends); one int64
  // reduce-scatter per unit into this rank's gradient shard.
  absl::Status BeforeLocalBackward(int chunk, int chunks);
  absl::Status AfterLocalBackwards() { return AfterBackward(); }
  std::vector<ExactGroup> ExactGroups() override;
  collective::Communicator* communicator() const override {
    return communicator_;
  }
  // Collective: gathers every unit (until the next step starts).
  absl::Status GatherFullParameters() override;

  // The parameter provider (trainer/model/unit_hooks.h). Throw on a failed gather.
  void BeforeUnitForward(int unit) override;
  at::Tensor AfterUnitForward(int unit, const at::Tensor& output) override;

  // This rank's shard of every unit, in unit order, as flat-layout ranges.
  std::vector<FlatAdamW::Range> shard_ranges() const;
  // Elements of shard_ranges() summed.
  int64_t shard_numel() const;

 private:
  enum class Gathered { kFreed, kInFlight, kYes };
  // One unit of the store seen as n shards.
  struct Unit {
    std::vector<int64_t> counts;  // per rank, elements
    int64_t shard_offset = 0;     // this rank's first element in the unit
    int64_t shard_numel = 0;
    at::Tensor shard;       // (shard_numel) fp32 master parameters
    at::Tensor grad_shard;  // (shard_numel) reduced gradient
    // (numel) the unit's full gradient while held (its parameters' .grad
    // are views of it): from before its backward until its reduce-scatter
    // has landed.
    at::Tensor full_grad;
    // The reduce-scatter's output when this sync adds onto grad_shard.
    at::Tensor incoming;
    Gathered gathered = Gathered::kFreed;
    collective::CollectiveHandle gather;
    collective::CollectiveHandle reduce;
    bool reducing = false;  // a reduce-scatter not yet finished
  };

  bool communicating() const;
  // Model and optimizer pieces of this rank's shards.
  std::vector<StatePiece> ShardPieces() const;
  int root() const { return 0; }
  int unit_count() const { return static_cast<int>(units_.size()); }
  // Unit <-> bucket of the engine: bucket b is unit unit_count() - 1 - b.
  int UnitOfBucket(int bucket) const { return unit_count() - 1 - bucket; }
  std::string UnitName(int unit) const;

  // `ahead`: a prefetch (its hidden time is counted).
  void IssueGather(int unit, bool ahead = false);
  absl::Status EnsureGathered(int unit);
  void Free(int unit);
  void AttachFullGradient(int unit);
  // Before unit `unit`'s backward (the hook on its output's gradient).
  void BeforeUnitBackward(int unit);
  // From the engine: every gradient of `bucket`'s unit is accumulated.
  void OnUnitBackwardDone(int bucket);
  void LaunchReduceScatter(int unit);
  absl::Status FinishReduceScatter(int unit);
  absl::Status FinishBackward();

  collective::Communicator* communicator_;
  FsdpOptions options_;
  ParameterStore* store_ = nullptr;
  std::unique_ptr<FlatAdamW> optimizer_;
  BucketEngine engine_;
  std::vector<Unit> units_;  // per store unit

  // Per backward / step.
  bool backward_in_flight_ = false;
  bool syncing_ = false;     // this backward reduce-scatters
  bool accumulate_ = false;  // this sync adds onto the shards
  int last_launched_ = -1;   // unit whose reduce-scatter was launched last
  absl::Status hook_error_;  // a failed reduce-scatter inside backward
  int syncs_ = 0;
  int micro_batches_ = 0;
  double wait_ms_ = 0;
  // The collective log's totals at the step's start (ZeroGradients), per op.
  std::map<collective::CollectiveOp, collective::CollectiveTotals>
      totals_at_step_start_;
  // Prefetched gathers' sequence numbers until they complete, and their
  // hidden time this step (filled by an observer of the collective log).
  collective::CollectiveLog::ObserverId observer_ = -1;
  absl::Mutex prefetch_mutex_;
  std::set<int64_t> prefetched_ ABSL_GUARDED_BY(prefetch_mutex_);
  double hidden_ms_ ABSL_GUARDED_BY(prefetch_mutex_) = 0;
};

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_FSDP_H_
