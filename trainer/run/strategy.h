// How a training step is distributed (docs/design.md "Strategies"). The
// loop (trainer/run/trainer.h) owns the model, data and schedule and calls a
// Strategy at fixed points of every step; a strategy adds communication
// there. SingleStrategy (one rank, no communication) is the reference every
// other strategy must equal; DdpStrategy (trainer/strategy/ddp.h),
// ZeroStrategy (trainer/strategy/zero.h, zero1 and zero2) and FsdpStrategy
// (trainer/strategy/fsdp.h) are the distributed ones. Every strategy works
// on the flat parameter store (trainer/model/parameter_store.h); which one
// --strategy names is decided in one place (trainer/strategy/registry.h,
// its factory in trainer/strategy/factory.h).
//
// Collective contract: on every rank the loop makes the same calls in the same
// order with the same step, so a strategy may issue collectives from any of
// them. The order per optimizer step (`mode` the run's reduction mode):
//
//   ZeroGradients()           (local: the step's zero_grad)
//   for each piece p of P:    forward (unit_hooks() are called in it and
//                             may issue collectives: fsdp's gathers);
//                             BeforeBackward(p, P, mode); loss.backward()
//                             (gradient hooks a strategy registered in Setup
//                              run inside backward, on the calling thread)
//   AfterBackward(mode)       (kFloat: gradients complete on every rank)
//   GlobalGradNorm()          (kFloat: the norm of the full gradient, before
//                              clipping; kExact: ExactGroups() are reduced
//                              over communicator() by the loop instead)
//   -- the loop gathers the step's scalars over communicator(); every rank
//      stops together on a non-finite loss or norm, skipping the rest --
//   OptimizerStep(lr, scale)  (the gradient scaled by the clipping
//                              coefficient, 1 for none, then AdamW)
//   TakeStepCommunication()   (local: what the step's gradient sync and
//                              parameter gather cost; the loop's scalar
//                              collectives are not counted)
//
// Checkpoint state (docs/checkpoint.md "Strategy state"). A
// checkpoint holds GLOBAL tensors, whatever the strategy and world size:
//
//   model/<name>                  the parameter, in its own global shape
//   optimizer/exp_avg/<name>      AdamW's m of that parameter (same shape)
//   optimizer/exp_avg_sq/<name>   AdamW's v
//   optimizer/step                AdamW's update count (int64, shape {})
//
// with <name> the parameter's name (NamedParameter::name). A strategy does
// not write files; it lists StatePieces: (name, global shape, offset, values)
// where values are elements [offset, offset + length) of the row-major
// flattened global tensor, as a contiguous 1-D view of its live state (fp32,
// int64 for the step). A rank's flat range that spans several parameters
// (a zero shard, an fsdp shard of a unit) is split into one piece per
// parameter (trainer/model/state_pieces.h does the splitting for flat ranges).
// The contract, which every strategy (fsdp included) keeps:
//
//   CheckpointPiecesToSave()  local; over all ranks the pieces cover every
//       element of every tensor above exactly once (the manifest records
//       each piece's rank, offset and length: its placement). Who writes a
//       replicated tensor is the strategy's choice (ddp: each rank an even,
//       disjoint slice of the flat layout, so every rank writes ~1/n).
//   CheckpointPiecesToLoad()  local; the pieces this rank must hold to
//       continue, as views the loader overwrites in place. They may overlap
//       other ranks' (ddp and zero hold the whole model on every rank) and
//       need not match the pieces saved: the loader reads any element range
//       from whichever shard files hold it (the manifest's placements), which
//       is what lets a later loader reshard onto another world size.
//   FinishCheckpointLoad()  collective; after every load piece has been
//       written on every rank: whatever the strategy derives from its state.
//
// Both lists are called between steps only (never with a collective in
// flight) and are valid until the next step.
#ifndef MTB_TRAINER_RUN_STRATEGY_H_
#define MTB_TRAINER_RUN_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/model/optimizer.h"
#include "trainer/model/parameter_store.h"
#include "trainer/model/unit_hooks.h"

namespace mtb {
namespace collective {
class Communicator;
}  // namespace collective

// What one optimizer step's gradient synchronisation cost this rank.
struct StepCommunication {
  // Time blocked waiting for gradient collectives (not hidden by backward).
  double wait_ms = 0;
  // Bytes sent for gradient collectives, as counted by the collective layer,
  // and the closed form for the strategy (ddp: 2(n-1)/n * gradient bytes per
  // synchronisation).
  int64_t bytes_sent = 0;
  int64_t expected_bytes = 0;
  // Micro-batches whose backward synchronised gradients.
  int syncs = 0;
  // Sharded strategies: the all-gather of updated parameters (counted and
  // closed form), 0 otherwise.
  int64_t gather_bytes_sent = 0;
  int64_t expected_gather_bytes = 0;
  // fsdp: the parameter all-gathers of the step (counted by the collective
  // layer), their summed time in flight (issued -> transfer done), the time
  // this rank was blocked waiting for them, and of the prefetched ones the
  // time in flight not waited for: hidden behind computation
  // (--fsdp_prefetch; 0 without).
  int gathers = 0;
  double gather_in_flight_ms = 0;
  double gather_wait_ms = 0;
  double gather_hidden_ms = 0;
  // Tensor parallelism (trainer/tp/strategy.h): bytes sent on the tp group
  // during the step, counted and closed form; 0 otherwise.
  int64_t tp_bytes_sent = 0;
  int64_t expected_tp_bytes = 0;
};

// Bytes of the tensors a strategy owns, found by walking them (not from a
// formula): what this rank holds right now. Walking
// allocates nothing, so it may run between any two allocations.
struct HeldMemory {
  int64_t parameters = 0;
  int64_t gradients = 0;        // full gradients and gradient shards
  int64_t optimizer_state = 0;  // AdamW m and v
  // The strategy's staging and reduce-scatter outputs plus what its
  // communicator allocated for collectives still alive
  // (Communicator::TemporaryBytes).
  int64_t collective_temporaries = 0;
  int64_t total() const {
    return parameters + gradients + optimizer_state + collective_temporaries;
  }
};

// One rank's piece of a global checkpoint tensor (see the file comment).
struct StatePiece {
  std::string name;                   // "model/wte", "optimizer/step", ...
  std::vector<int64_t> global_shape;  // {} for a scalar
  int64_t offset = 0;  // first element in the flattened global tensor
  at::Tensor values;   // (length) contiguous CPU fp32 or int64
};

// Told of every point at which what a strategy holds (Strategy::Held) may
// have changed (trainer/memory/memory_peak.h attributes the allocator's peak between
// two marks to what was held at the first of them).
class MemoryMarks {
 public:
  virtual ~MemoryMarks() = default;
  // `what`: a string literal naming the point ("zero: reduce-scatter
  // launched for bucket"); `index`: the bucket, parameter or micro-batch it
  // is about, or -1.
  virtual void Mark(const char* what, int index) = 0;
};

// A gradient bucket, for reports (trainer/train_result.proto BucketInfo).
struct BucketSummary {
  int parameters = 0;
  int64_t bytes = 0;
  std::string first_parameter;
  std::string last_parameter;
};

// Exact mode (--reduction=exact, trainer/exact/exact.h): one piece of the int64
// gradient reduction, as the strategy cuts it (a ddp bucket, a zero bucket, an
// fsdp unit). Flat-layout elements [offset, offset + numel) are summed over
// ranks: all-reduced when `counts` is empty (every rank receives all of
// them), else reduce-scattered with these per-rank counts (EvenCounts: rank r
// receives its counts[r] elements, after those of ranks 0..r-1).
// `destination` is where this rank's reduced fp32 gradient goes: (numel) for
// an all-reduce, (counts[rank]) for a reduce-scatter.
struct ExactGroup {
  int64_t offset = 0;
  int64_t numel = 0;
  std::vector<int64_t> counts;
  at::Tensor destination;
};

// How the step's gradient is reduced (--reduction; trainer/run/
// gradient_reduction.h): kFloat, the strategy's own fp32 collectives during
// backward; kExact, a backward that synchronises nothing (every piece's
// gradient lands whole in the parameters' .grad) before the int64 reduction
// of ExactGroups().
enum class ReductionMode { kFloat, kExact };

// Which checkpoint list CheckpointPieces returns (see the file comment).
enum class CheckpointUse { kSave, kLoad };

// What a strategy says about itself in logs and results.
struct StrategySummary {
  std::string name;         // "ddp", "zero2", ... (trainer/strategy/registry.h)
  std::string description;  // one line: how gradients are synchronised
  std::vector<BucketSummary> buckets;  // in launch order; empty without
};

// The interface every strategy implements: 15 methods, in the order the loop
// uses them. Nothing here is a scalar collective: the step's scalars go over
// communicator() (trainer/run/step_scalars.h).
class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual StrategySummary Summary() const = 0;
  // The ranks' communicator (nullptr: one rank, nothing to communicate).
  virtual collective::Communicator* communicator() const = 0;

  // Called once per model (each --repeat run builds a new one), before any
  // step: e.g. check every rank built the same model, broadcast rank 0's
  // parameters, register gradient hooks, shard. `store` outlives the
  // strategy's use of it (until the next Setup or the strategy's end).
  virtual absl::Status Setup(ParameterStore& store,
                             const AdamWOptions& optimizer) = 0;

  // Local: the step's zero_grad (attached flat gradients are zeroed; a
  // strategy that keeps only a shard drops the full gradients).
  virtual void ZeroGradients() = 0;

  // Before piece `piece`'s backward (0-based, of `pieces`): under kFloat,
  // where DDP decides whether this backward synchronises (no_sync); under
  // kExact, a backward that synchronises nothing.
  virtual absl::Status BeforeBackward(int piece, int pieces,
                                      ReductionMode mode) = 0;

  // After the last piece's backward: under kFloat the gradient reduction
  // completes here; under kExact the local backward ends (fsdp frees the
  // root).
  virtual absl::Status AfterBackward(ReductionMode mode) = 0;

  // sqrt(sum of squares) of the whole model's gradient (correct when
  // gradients are sharded), in fp64. The same value on every rank (kFloat).
  virtual absl::StatusOr<double> GlobalGradNorm() = 0;

  // Multiplies the whole gradient (every shard) by `gradient_scale` (1: not
  // at all; clipping), then the AdamW update with learning rate `lr`
  // (sharded strategies update their shard, then gather).
  virtual absl::Status OptimizerStep(double lr, double gradient_scale) = 0;

  // The step's communication figures (since the last BeforeBackward(0, K)),
  // after OptimizerStep.
  virtual StepCommunication TakeStepCommunication() = 0;

  // Local: the bytes of the tensors this strategy owns now, walked.
  virtual HeldMemory Held() const = 0;

  // Checkpoint state: the contract is in the file comment. Call after Setup.
  virtual std::vector<StatePiece> CheckpointPieces(CheckpointUse use) = 0;
  virtual absl::Status FinishCheckpointLoad() = 0;

  // The strategy's per-unit points in the model's forward
  // (trainer/model/unit_hooks.h), or nullptr: fsdp provides the parameters there.
  // Valid after Setup, until the next Setup.
  virtual UnitHooks* unit_hooks() { return nullptr; }

  // kExact: the reduction pieces, covering every flat element once, in a
  // fixed order that is the same on every rank (ExactGroup). Valid after
  // Setup.
  virtual std::vector<ExactGroup> ExactGroups() = 0;

  // Collective: makes every parameter tensor hold its full values (e.g. to
  // dump them after the last step). fsdp gathers every unit, which stays
  // gathered until the next step starts; the replicating strategies hold them
  // already.
  virtual absl::Status GatherFullParameters() { return absl::OkStatus(); }

  // Derived, for callers.
  std::string name() const { return Summary().name; }
  std::string Describe() const { return Summary().description; }
  std::vector<BucketSummary> Buckets() const { return Summary().buckets; }
  int world_size() const;
  // The communicator's backend ("gloo"), or "none" when nothing is
  // communicated.
  std::string backend() const;
  std::vector<StatePiece> CheckpointPiecesToSave() const {
    // Listing the pieces to save changes nothing.
    return const_cast<Strategy*>(this)->CheckpointPieces(CheckpointUse::kSave);
  }
  std::vector<StatePiece> CheckpointPiecesToLoad() {
    return CheckpointPieces(CheckpointUse::kLoad);
  }

  // Where the memory marks go (nullptr: nowhere, the default). The loop sets
  // it to the run's components for every step (trainer/run/trainer.cc).
  // Contract for implementations: call MarkMemory right after every change
  // of what Held() counts (a tensor it walks allocated or freed, a
  // collective issued or finished), before anything else is allocated, so
  // that Held() is constant between two marks; frees may run in a row under
  // one mark (live bytes only fall). docs/trainer.md "Memory at the peak".
  void set_memory_marks(MemoryMarks* marks) { memory_marks_ = marks; }

 protected:
  void MarkMemory(const char* what, int index = -1) const {
    if (memory_marks_ != nullptr) memory_marks_->Mark(what, index);
  }

 private:
  MemoryMarks* memory_marks_ = nullptr;
};

// Bytes of the storage `tensor` views (0 when undefined).
int64_t StorageBytes(const at::Tensor& tensor);

// One rank, no communication, no hooks: the reference every other strategy
// must equal.
class SingleStrategy : public Strategy {
 public:
  StrategySummary Summary() const override;
  collective::Communicator* communicator() const override { return nullptr; }
  absl::Status Setup(ParameterStore& store,
                     const AdamWOptions& optimizer) override;
  void ZeroGradients() override;
  absl::Status BeforeBackward(int, int, ReductionMode) override {
    return absl::OkStatus();
  }
  absl::Status AfterBackward(ReductionMode) override {
    return absl::OkStatus();
  }
  absl::StatusOr<double> GlobalGradNorm() override;
  absl::Status OptimizerStep(double lr, double gradient_scale) override;
  StepCommunication TakeStepCommunication() override { return {}; }
  HeldMemory Held() const override;
  // Everything, on its one rank, to save and to load.
  std::vector<StatePiece> CheckpointPieces(CheckpointUse use) override;
  absl::Status FinishCheckpointLoad() override { return absl::OkStatus(); }
  // The whole flat gradient (one rank: the "all-reduce" is local).
  std::vector<ExactGroup> ExactGroups() override;

 private:
  ParameterStore* store_ = nullptr;
  std::unique_ptr<FlatAdamW> optimizer_;
};

// Elements per AdamW piece for strategies without buckets (1 MiB of fp32).
inline constexpr int64_t kOptimizerPieceElements = int64_t{1} << 18;

// The fp64 L2 norm of the gradients of `parameters` (those that have one).
double GradNorm(const std::vector<NamedParameter>& parameters);

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_STRATEGY_H_
