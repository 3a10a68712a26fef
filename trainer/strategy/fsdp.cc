// FSDP over the flat parameter store. Vocabulary (bucket engine, launch and
// sync as in zero.cc; units as in parameter_store.h):
//
//   shard     this rank's part of a unit: counts[r] consecutive elements of
//             it (EvenCounts: sizes differ by at most one), holding the fp32
//             master parameters (`shard`), the reduced gradient
//             (`grad_shard`) and the AdamW state (FlatAdamW over the shards'
//             flat-layout ranges). 16 bytes per element: 16 Psi / N at rest.
//   gathered  a unit's full parameters present in its own storage (the store
//             is split into one storage per unit). Gathering allocates the
//             storage and all-gathers every rank's shard into it (AllGatherV,
//             exact counts, no padding); freeing resizes the storage to 0
//             bytes. Dropping references would not free it — autograd's saved
//             views of the parameters keep the storage alive — but resizing
//             the shared storage frees it under all of them at once, and
//             refilling the same storage brings their values back. The
//             collective writes the store's unit buffer, never the parameter
//             tensors or their views, so no version counter moves and
//             autograd's saved tensors stay valid.
//   provider  the model calls BeforeUnitForward(u) before each unit's forward
//             and AfterUnitForward(u, out) after it (trainer/model/unit_hooks.h).
//             Before: make u gathered (waiting for a prefetch in flight).
//             After (blocks): hang a hook on out's gradient, which fires
//             before u's backward (and before an activation-checkpoint
//             recompute); with reshard_after_forward, free u.
//   pre-backward  that hook: make u gathered again if it was freed, and
//             attach a zeroed full gradient whose views become the
//             parameters' .grad, so backward accumulates in place.
//   done      the bucket engine's hooks on the gradient accumulators (one
//             bucket per unit, in reverse unit order) say when every gradient
//             of u is accumulated: u's backward is over. Then u's full
//             gradient is reduce-scattered (avg) into its shard, and u is
//             freed (a block; the root waits for the end of the step). The
//             full gradient is freed when its reduce-scatter has landed,
//             which is waited for when the next unit's backward is done,
//             before that unit's is launched: one reduce-scatter in flight,
//             overlapping the next unit's backward.
//   root      unit 0 (wte, wpe, ln_f; the LM head is tied to wte) is used at
//             both ends of the forward and its gradient completes last in
//             backward, so it is gathered once per step, at the first
//             forward, and freed at the end of the step's backward (2 Psi_root
//             moved per step, not 3): it is small next to the blocks here,
//             and freeing it between the head and the embedding would gather
//             it twice more per micro-batch.
//   prefetch  with --fsdp_prefetch, BeforeUnitForward(u) also issues u+1's
//             gather and the pre-backward of u issues u-1's (when freed), so
//             one unit's transfer overlaps the current unit's compute; at
//             most one unit ahead.
//   sync      a backward that reduce-scatters: every micro-batch under
//             --grad_sync=every (the default for fsdp), only the last under
//             last, which keeps every unit's full gradient across
//             micro-batches (4 Psi more per rank). Later syncs of a step go
//             through `incoming` and are added onto the shard, as zero's.
//
// Memory marks (Strategy::set_memory_marks): every allocation or free of
// what Held() walks — a unit's storage, a full gradient, a reduce-scatter
// output, a collective's temporaries at its issue and its wait — is followed
// by a mark, so the breakdown at the peak is exact (trainer/memory/memory_peak.h).
//
// One reduction path with zero2: per element, the reduce-scatter sums the n
// ranks' values in rank order and divides by n whatever the cut into pieces,
// so fsdp's gradient shards hold the same bits as zero2's, AdamW is
// elementwise, and the parameters stay bit-identical. The gradient norm is an
// fp64 sum over differently cut shards, so it may differ in its last bits.
#include "trainer/strategy/fsdp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/collective/traffic.h"
#include "common/report/report.h"
#include "glog/logging.h"
#include "trainer/output/metrics.h"
#include "trainer/model/state_pieces.h"
#include "trainer/strategy/replicas.h"
#include "trainer/strategy/scalars.h"

namespace mtb {
namespace {

constexpr int64_t kFp32Bytes = 4;

double Ms(absl::Duration duration) {
  return absl::ToDoubleMilliseconds(duration);
}

// A provider that cannot supply parameters must stop the forward or
// backward: the unit would otherwise compute on freed memory.
void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw std::runtime_error(std::string(status.message()));
}

}  // namespace

FsdpOptions FsdpOptionsFromConfig(bool reshard_after_forward, bool prefetch,
                                  const std::string& grad_sync) {
  FsdpOptions options;
  options.reshard_after_forward = reshard_after_forward;
  options.prefetch = prefetch;
  options.grad_sync = GradSyncFromName(grad_sync);
  return options;
}

FsdpStrategy::FsdpStrategy(collective::Communicator* communicator,
                           const FsdpOptions& options)
    : communicator_(communicator), options_(options) {
  if (!communicating()) return;
  // A prefetched gather's time in flight minus the time waited for it is
  // what the prefetch hid; the record of each completion carries both.
  observer_ = communicator_->log().AddObserver(
      [this](collective::CollectiveEvent event,
             const collective::CollectiveRecord& record) {
        if (event != collective::CollectiveEvent::kCompleted ||
            record.op != collective::CollectiveOp::kAllGatherV) {
          return;
        }
        absl::MutexLock lock(&prefetch_mutex_);
        if (prefetched_.erase(record.sequence) == 0) return;
        hidden_ms_ += std::max(0.0, Ms(record.duration - record.wait_time));
      });
}

FsdpStrategy::~FsdpStrategy() {
  if (observer_ >= 0) communicator_->log().RemoveObserver(observer_);
}

bool FsdpStrategy::communicating() const {
  return communicator_ != nullptr && communicator_->world_size() > 1;
}



std::string FsdpStrategy::UnitName(int unit) const {
  return store_ == nullptr ? absl::StrCat(unit) : store_->units()[unit].name;
}

std::string FsdpStrategy::Describe() const {
  const int64_t numel = store_ == nullptr ? 0 : store_->numel();
  const bool every = options_.grad_sync == GradSync::kEvery;
  return absl::StrCat(
      "fsdp: ", units_.size(),
      " units (root: embeddings, ln_f, tied head; one per block), each kept "
      "as this rank's shard of parameters, gradient and AdamW state (",
      shard_numel(), " of ", numel,
      " elements); a block is all-gathered before its forward, ",
      options_.reshard_after_forward
          ? "freed after it and gathered again before its backward "
            "(reshard_after_forward)"
          : "kept until its backward (reshard_after_forward=false)",
      ", its gradient reduce-scattered (avg) as its backward finishes and the "
      "full gradient freed; the root is gathered once per step and freed "
      "after the backward; prefetch ",
      options_.prefetch ? "on (the next unit's all-gather in flight while "
                          "the current unit computes)"
                        : "off",
      "; grad_sync=", every ? "every" : "last",
      every ? ""
            : absl::StrCat(
                  " (keeps every unit's full gradient across micro-batches: +",
                  FormatByteAmount(static_cast<double>(numel * kFp32Bytes)),
                  " per rank)"),
      communicating() ? "" : "; one rank: no communication",
      options_.testonly_keep_gathered_units
          ? "; TEST-ONLY FAULT keep_gathered_units"
          : "");
}

absl::Status FsdpStrategy::Setup(ParameterStore& store,
                                 const AdamWOptions& optimizer) {
  store_ = &store;
  store.DetachGradients();
  const int n = world_size();
  const int rank = communicator_ == nullptr ? 0 : communicator_->rank();
  // One bucket per unit, in the order backward completes them.
  std::vector<GradientBucket> buckets;
  for (int u = static_cast<int>(store.units().size()) - 1; u >= 0; --u) {
    const ParameterUnit& unit = store.units()[u];
    GradientBucket bucket;
    bucket.parameters.assign(unit.parameters.rbegin(), unit.parameters.rend());
    bucket.offset = unit.offset;
    bucket.numel = unit.numel;
    buckets.push_back(std::move(bucket));
  }
  if (communicating()) {
    RETURN_IF_ERROR(
        CheckSameParametersOnEveryRank(*communicator_, store, name()));
    RETURN_IF_ERROR(BroadcastParametersFromRankZero(*communicator_, store,
                                                    buckets, name()));
  }
  units_ = std::vector<Unit>(store.units().size());
  std::vector<FlatAdamW::Range> ranges;
  at::NoGradGuard no_grad;
  for (int u = 0; u < unit_count(); ++u) {
    const ParameterUnit& unit = store.units()[u];
    Unit& mine = units_[u];
    mine.counts = EvenCounts(unit.numel, n);
    const FlatRange slice = EvenSlice(unit.numel, n, rank);
    mine.shard_offset = slice.offset;
    mine.shard_numel = slice.numel;
    mine.shard = store.unit_parameters(u)
                     .narrow(0, mine.shard_offset, mine.shard_numel)
                     .clone();
    mine.grad_shard = at::zeros({mine.shard_numel}, at::kFloat);
    ranges.push_back({unit.offset + mine.shard_offset, mine.shard_numel});
  }
  // Every unit freed from here on: this rank keeps only its shards.
  store.SplitUnitStorage();
  optimizer_ = std::make_unique<FlatAdamW>(store, std::move(ranges), optimizer,
                                           kOptimizerPieceElements);
  engine_.Setup(store, std::move(buckets),
                [this](int bucket) { OnUnitBackwardDone(bucket); });
  backward_in_flight_ = false;
  return absl::OkStatus();
}

std::vector<FlatAdamW::Range> FsdpStrategy::shard_ranges() const {
  return optimizer_ == nullptr ? std::vector<FlatAdamW::Range>()
                               : optimizer_->ranges();
}

int64_t FsdpStrategy::shard_numel() const {
  int64_t total = 0;
  for (const Unit& unit : units_) total += unit.shard_numel;
  return total;
}

void FsdpStrategy::IssueGather(int u, bool ahead) {
  Unit& unit = units_[u];
  if (unit.gathered != Gathered::kFreed) return;
  at::NoGradGuard no_grad;
  store_->AllocateUnit(u);
  MarkMemory("fsdp: unit storage allocated", u);
  if (!communicating()) {
    store_->unit_parameters(u).copy_(unit.shard);
    unit.gathered = Gathered::kYes;
    return;
  }
  unit.gather = communicator_->AllGatherVAsync(
      unit.shard, store_->unit_parameters(u), unit.counts);
  unit.gathered = Gathered::kInFlight;
  MarkMemory("fsdp: all-gather issued for unit", u);
  if (ahead) {
    absl::MutexLock lock(&prefetch_mutex_);
    prefetched_.insert(unit.gather.sequence());
  }
}

absl::Status FsdpStrategy::EnsureGathered(int u) {
  Unit& unit = units_[u];
  IssueGather(u);
  if (unit.gathered == Gathered::kYes) return absl::OkStatus();
  const Stopwatch watch;
  const absl::Status waited = unit.gather.Wait();
  wait_ms_ += watch.ElapsedMs();
  unit.gather = collective::CollectiveHandle();
  MarkMemory("fsdp: all-gather finished for unit", u);
  RETURN_IF_ERROR(Annotate(
      waited, absl::StrCat(name(), ": all-gather of unit ", UnitName(u))));
  unit.gathered = Gathered::kYes;
  return absl::OkStatus();
}

void FsdpStrategy::Free(int u) {
  Unit& unit = units_[u];
  CHECK(unit.gathered != Gathered::kInFlight) << UnitName(u);
  // The test aid keeps the memory but not the values: the unit is gathered
  // again (into the same storage) whenever it would have been.
  if (!options_.testonly_keep_gathered_units) store_->FreeUnit(u);
  unit.gathered = Gathered::kFreed;
  MarkMemory("fsdp: unit freed", u);
}

void FsdpStrategy::AttachFullGradient(int u) {
  Unit& unit = units_[u];
  if (unit.full_grad.defined()) return;  // accumulating across micro-batches
  unit.full_grad = at::zeros({store_->units()[u].numel}, at::kFloat);
  MarkMemory("fsdp: full gradient allocated for unit", u);
  store_->AttachUnitGradients(u, unit.full_grad);
}

void FsdpStrategy::ZeroGradients() {
  CHECK(store_ != nullptr) << "Setup first";
  // Every step starts at rest, whatever happened since the last one (e.g.
  // GatherFullParameters).
  for (int u = 0; u < unit_count(); ++u) {
    Unit& unit = units_[u];
    CHECK(!unit.reducing) << UnitName(u);
    if (unit.gathered == Gathered::kInFlight) {
      ThrowIfError(EnsureGathered(u));
    }
    if (unit.gathered == Gathered::kYes) Free(u);
    store_->DetachUnitGradients(u);
    unit.full_grad = at::Tensor();
  }
  MarkMemory("fsdp: at rest");
  syncs_ = 0;
  micro_batches_ = 0;
  wait_ms_ = 0;
  totals_at_step_start_ = communicating() ? communicator_->log().TotalsByOp()
                                          : decltype(totals_at_step_start_)();
  absl::MutexLock lock(&prefetch_mutex_);
  hidden_ms_ = 0;
}

void FsdpStrategy::BeforeUnitForward(int u) {
  CHECK(store_ != nullptr) << "Setup first";
  ThrowIfError(EnsureGathered(u));
  if (options_.prefetch && u + 1 < unit_count()) IssueGather(u + 1, true);
}

at::Tensor FsdpStrategy::AfterUnitForward(int u, const at::Tensor& output) {
  if (u == root()) return output;
  if (output.requires_grad()) {
    output.register_hook(
        [this, u](const at::Tensor&) { BeforeUnitBackward(u); });
  }
  if (options_.reshard_after_forward) Free(u);
  return output;
}

void FsdpStrategy::BeforeUnitBackward(int u) {
  ThrowIfError(EnsureGathered(u));
  AttachFullGradient(u);
  // The previous block's gather flies while this one computes its backward.
  if (options_.prefetch && u - 1 > root()) IssueGather(u - 1, true);
}

absl::Status FsdpStrategy::BeforeBackward(int micro_batch, int micro_batches) {
  CHECK(store_ != nullptr) << "Setup first";
  // The previous micro-batch's reduce-scatters must have landed before this
  // backward writes the gradients again.
  RETURN_IF_ERROR(FinishBackward());
  micro_batches_ = micro_batches;
  syncing_ = options_.grad_sync == GradSync::kEvery ||
             micro_batch == micro_batches - 1;
  accumulate_ = syncing_ && syncs_ > 0;
  // The root's gradient completes last; it is used from the start of the
  // backward (the head), so its full gradient is attached now.
  AttachFullGradient(root());
  last_launched_ = -1;
  engine_.Arm();
  backward_in_flight_ = true;
  return absl::OkStatus();
}

absl::Status FsdpStrategy::BeforeLocalBackward(int, int chunks) {
  CHECK(store_ != nullptr) << "Setup first";
  RETURN_IF_ERROR(FinishBackward());
  micro_batches_ = chunks;  // each chunk's forward gathers every block
  syncing_ = false;
  accumulate_ = false;
  AttachFullGradient(root());
  last_launched_ = -1;
  engine_.Arm();  // its hooks free each block when its backward is done
  backward_in_flight_ = true;
  return absl::OkStatus();
}

std::vector<ExactGroup> FsdpStrategy::ExactGroups() {
  std::vector<ExactGroup> groups;
  for (int u = 0; u < unit_count(); ++u) {
    ExactGroup group;
    group.offset = store_->units()[u].offset;
    group.numel = store_->units()[u].numel;
    group.counts = units_[u].counts;
    group.destination = units_[u].grad_shard;
    groups.push_back(std::move(group));
  }
  return groups;
}

void FsdpStrategy::OnUnitBackwardDone(int bucket) {
  const int u = UnitOfBucket(bucket);
  if (syncing_) {
    // Bound what is in flight: the previously launched unit's reduce-scatter
    // (it had this unit's whole backward to run) lands first, freeing its
    // full gradient and blocks before this one allocates its own.
    if (last_launched_ >= 0) {
      const absl::Status finished = FinishReduceScatter(last_launched_);
      if (!finished.ok() && hook_error_.ok()) hook_error_ = finished;
    }
    LaunchReduceScatter(u);
    last_launched_ = u;
  }
  if (u != root()) Free(u);
}

void FsdpStrategy::LaunchReduceScatter(int u) {
  at::NoGradGuard no_grad;
  Unit& unit = units_[u];
  CHECK(unit.full_grad.defined()) << UnitName(u);
  if (accumulate_ && !unit.incoming.defined()) {
    unit.incoming = at::empty({unit.shard_numel}, at::kFloat);
    MarkMemory("fsdp: reduce-scatter output allocated for unit", u);
  }
  const at::Tensor& output = accumulate_ ? unit.incoming : unit.grad_shard;
  unit.reducing = true;
  if (!communicating()) {
    output.copy_(unit.full_grad);  // the average of one gradient
    return;
  }
  unit.reduce = communicator_->ReduceScatterVAsync(
      unit.full_grad, output, unit.counts, collective::ReduceOp::kAvg);
  MarkMemory("fsdp: reduce-scatter launched for unit", u);
}

absl::Status FsdpStrategy::FinishReduceScatter(int u) {
  Unit& unit = units_[u];
  if (!unit.reducing) return absl::OkStatus();
  unit.reducing = false;
  at::NoGradGuard no_grad;
  if (communicating()) {
    const Stopwatch watch;
    const absl::Status waited = unit.reduce.Wait();
    wait_ms_ += watch.ElapsedMs();
    unit.reduce = collective::CollectiveHandle();
    RETURN_IF_ERROR(Annotate(
        waited, absl::StrCat(name(), ": gradient reduce-scatter of unit ",
                             UnitName(u))));
  }
  if (accumulate_) unit.grad_shard.add_(unit.incoming);
  // The full gradient is gone once its shard has landed.
  store_->DetachUnitGradients(u);
  unit.full_grad = at::Tensor();
  MarkMemory("fsdp: reduce-scatter finished for unit", u);
  return absl::OkStatus();
}

absl::Status FsdpStrategy::FinishBackward() {
  if (!backward_in_flight_) return absl::OkStatus();
  backward_in_flight_ = false;
  engine_.Disarm();
  RETURN_IF_ERROR(hook_error_);
  RETURN_IF_ERROR(engine_.CheckAllLaunched(name()));
  if (!syncing_) return absl::OkStatus();
  ++syncs_;
  for (int u = 0; u < unit_count(); ++u) {
    RETURN_IF_ERROR(FinishReduceScatter(u));
  }
  // The reduce-scatter outputs live only for one sync.
  for (Unit& unit : units_) unit.incoming = at::Tensor();
  MarkMemory("fsdp: reduce-scatter outputs freed");
  return absl::OkStatus();
}

absl::Status FsdpStrategy::AfterBackward() {
  RETURN_IF_ERROR(FinishBackward());
  // The root was gathered once for the whole step.
  if (units_[root()].gathered == Gathered::kYes) Free(root());
  return absl::OkStatus();
}

StepCommunication FsdpStrategy::TakeStepCommunication() {
  StepCommunication step;
  step.wait_ms = wait_ms_;
  step.syncs = syncs_;
  if (!communicating()) return step;
  using collective::CollectiveOp;
  const auto now = communicator_->log().TotalsByOp();
  auto delta = [&](CollectiveOp op) {
    collective::CollectiveTotals d;
    if (auto it = now.find(op); it != now.end()) d = it->second;
    if (auto it = totals_at_step_start_.find(op);
        it != totals_at_step_start_.end()) {
      d.calls -= it->second.calls;
      d.bytes_sent -= it->second.bytes_sent;
      d.duration -= it->second.duration;
      d.wait_time -= it->second.wait_time;
    }
    return d;
  };
  const collective::CollectiveTotals reduce =
      delta(CollectiveOp::kReduceScatterV);
  const collective::CollectiveTotals gather = delta(CollectiveOp::kAllGatherV);
  step.bytes_sent = reduce.bytes_sent;
  step.gather_bytes_sent = gather.bytes_sent;
  step.gathers = static_cast<int>(gather.calls);
  step.gather_in_flight_ms = Ms(gather.duration);
  step.gather_wait_ms = Ms(gather.wait_time);
  {
    absl::MutexLock lock(&prefetch_mutex_);
    step.gather_hidden_ms = hidden_ms_;
  }
  // The closed forms, from the layer's byte model of each unit's exact
  // counts: per sync one reduce-scatter of every unit; the root gathered
  // once per step, each block once per micro-batch for its forward and, with
  // reshard_after_forward, once more for its backward. When n divides every
  // unit: (n-1)/n * 4 * (S Psi + Psi_root + (1 or 2) K Psi_blocks).
  const int rank = communicator_->rank();
  int64_t reduce_scatter = 0;
  int64_t root_gather = 0;
  int64_t block_gathers = 0;
  for (int u = 0; u < unit_count(); ++u) {
    const Unit& unit = units_[u];
    reduce_scatter +=
        collective::ReduceScatterVTraffic(unit.counts, kFp32Bytes, rank).sent;
    const int64_t gather_bytes =
        collective::AllGatherVTraffic(unit.counts, kFp32Bytes, rank).sent;
    (u == root() ? root_gather : block_gathers) += gather_bytes;
  }
  step.expected_bytes = syncs_ * reduce_scatter;
  step.expected_gather_bytes =
      root_gather +
      block_gathers * micro_batches_ * (options_.reshard_after_forward ? 2 : 1);
  return step;
}

std::vector<BucketSummary> FsdpStrategy::Buckets() const {
  return engine_.Summaries();
}

absl::StatusOr<double> FsdpStrategy::GlobalGradNorm() {
  double sum_of_squares = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    sum_of_squares += store_->SquaredNormCounted(
        unit.grad_shard, store_->units()[u].offset + unit.shard_offset);
  }
  ASSIGN_OR_RETURN(const double total,
                   ReduceScalarOverRanks(communicator_, sum_of_squares,
                                         ScalarReduction::kSum, name()));
  return std::sqrt(total);
}

absl::Status FsdpStrategy::ScaleGradients(double factor) {
  at::NoGradGuard no_grad;
  for (Unit& unit : units_) unit.grad_shard.mul_(factor);
  return absl::OkStatus();
}



absl::Status FsdpStrategy::OptimizerStep(double lr, double gradient_scale) {
  // Clipping: 1 when the norm is within the limit.
  if (gradient_scale != 1) RETURN_IF_ERROR(ScaleGradients(gradient_scale));
  std::vector<at::Tensor> grads;
  std::vector<at::Tensor> params;
  for (const Unit& unit : units_) {
    grads.push_back(unit.grad_shard);
    params.push_back(unit.shard);
  }
  optimizer_->Step(lr, grads, params);
  MarkMemory("fsdp: shards updated");
  return absl::OkStatus();
}

absl::Status FsdpStrategy::GatherFullParameters() {
  for (int u = 0; u < unit_count(); ++u) RETURN_IF_ERROR(EnsureGathered(u));
  return absl::OkStatus();
}

std::vector<StatePiece> FsdpStrategy::CheckpointPiecesToSave() const {
  // This rank's shard of every unit (its master parameters and AdamW state),
  // split per parameter; the step once, from rank 0.
  std::vector<StatePiece> pieces = ShardPieces();
  if (communicator_ == nullptr || communicator_->rank() == 0) {
    pieces.push_back(OptimizerStepPiece(*optimizer_));
  }
  return pieces;
}

std::vector<StatePiece> FsdpStrategy::CheckpointPiecesToLoad() {
  // The same shards: a rank holds nothing else at rest.
  std::vector<StatePiece> pieces = ShardPieces();
  pieces.push_back(OptimizerStepPiece(*optimizer_));
  return pieces;
}

absl::Status FsdpStrategy::FinishCheckpointLoad() {
  // A unit gathered before the load (GatherFullParameters) holds the old
  // values: free it; the next forward gathers the loaded shards.
  for (int u = 0; u < unit_count(); ++u) {
    if (units_[u].gathered == Gathered::kInFlight) {
      RETURN_IF_ERROR(EnsureGathered(u));
    }
    if (units_[u].gathered == Gathered::kYes) Free(u);
  }
  return absl::OkStatus();
}

std::vector<StatePiece> FsdpStrategy::ShardPieces() const {
  std::vector<at::Tensor> values;
  for (const Unit& unit : units_) values.push_back(unit.shard);
  std::vector<StatePiece> pieces =
      ModelPiecesOf(*store_, optimizer_->ranges(), values);
  std::vector<StatePiece> state =
      OptimizerPieces(*store_, *optimizer_, optimizer_->ranges());
  pieces.insert(pieces.end(), state.begin(), state.end());
  return pieces;
}

HeldMemory FsdpStrategy::Held() const {
  HeldMemory held;
  for (int u = 0; u < unit_count(); ++u) {
    const Unit& unit = units_[u];
    held.parameters +=
        StorageBytes(store_->unit_parameters(u)) + StorageBytes(unit.shard);
    held.gradients +=
        StorageBytes(unit.full_grad) + StorageBytes(unit.grad_shard);
    held.collective_temporaries += StorageBytes(unit.incoming);
  }
  held.optimizer_state = optimizer_->state_bytes();
  if (communicating()) {
    held.collective_temporaries += communicator_->TemporaryBytes();
  }
  return held;
}

}  // namespace mtb
