// ZeRO-1 and ZeRO-2 over the flat parameter store. Vocabulary (bucket, ready
// order, launch, sync as in ddp.cc; the engine is bucket_engine.h):
//
//   piece     a bucket seen as n shards: rank p owns counts[p] consecutive
//             elements of it (sizes differ by at most one when n does not
//             divide the bucket). The reduce-scatter and the all-gather move
//             one piece each, so --bucket_cap_mb bounds their temporaries;
//             the uneven ("v") collectives move exact counts, so there is no
//             padding and nothing reads any.
//   shard     this rank's part of a piece: its reduced gradient (grad_shard),
//             its AdamW state (FlatAdamW over the shards' ranges), and its
//             slice of the flat parameters, which it updates.
//   launch    reduce-scatter (average) of the bucket's gradients, started
//             from the gradient hooks as soon as the bucket is complete, in
//             bucket order. zero1 reduce-scatters straight from the flat
//             gradient buffer; zero2 copies the bucket's .grad tensors into a
//             staging buffer and frees them at once, so a full gradient
//             exists only for buckets in flight (and for parameters whose
//             bucket is not yet complete).
//   gather    after AdamW, every piece's updated shards all-gathered into the
//             flat parameters, bucket by bucket.
//   in flight at most kInFlightBuckets buckets' collectives at once: bucket b
//             first finishes bucket b - 2 (inside backward), which frees its
//             staging and the collective's temporaries, then allocates its
//             own, so memory beyond the shards is bounded by a few buckets,
//             not by the model (zero2: 2 staging copies and 2 reduce-scatter
//             blocks, plus the .grad tensors of the bucket backward is
//             filling).
//
// Memory marks (Strategy::set_memory_marks): every allocation or free of
// what Held() walks is followed by a mark, so the peak's breakdown is exact
// (trainer/memory/memory_peak.h).
//
// One reduction path: zero1 and zero2 issue the same collectives on the same
// values, so at the same --grad_sync they give the same bits. Under
// --grad_sync=every each micro-batch's reduce-scatter is added onto the
// shards (the average of the sum is the sum of the averages), so the first
// sync writes the shard and later ones go through `incoming`.
//
// Gradient norm: the fp64 sum of squares of every shard, all-reduced, then
// the square root; clipping scales the shards. Only shards are read after
// the syncs: the rest of zero1's flat gradient holds this rank's local values.
#include "trainer/strategy/zero.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status.h"
#include "common/collective/traffic.h"
#include "glog/logging.h"
#include "trainer/output/metrics.h"
#include "trainer/strategy/replicas.h"
#include "trainer/model/state_pieces.h"
#include "trainer/strategy/scalars.h"

namespace mtb {
namespace {

constexpr int64_t kFp32Bytes = 4;
// Buckets whose collective may be in flight at once (reduce-scatter during
// backward, all-gather after AdamW): enough to overlap one bucket's
// communication with the next one's computation.
constexpr size_t kInFlightBuckets = 2;

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.3g MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

ZeroOptions ZeroOptionsFromConfig(int stage, double bucket_cap_mb,
                                  const std::string& grad_sync) {
  ZeroOptions options;
  options.stage = stage;
  options.bucket_cap_bytes =
      std::max<int64_t>(1, std::llround(bucket_cap_mb * (1 << 20)));
  options.grad_sync = GradSyncFromName(grad_sync);
  return options;
}

ZeroStrategy::ZeroStrategy(collective::Communicator* communicator,
                           const ZeroOptions& options)
    : communicator_(communicator), options_(options) {
  CHECK(options_.stage == 1 || options_.stage == 2) << options_.stage;
  CHECK_GT(options_.bucket_cap_bytes, 0);
  CHECK_GT(options_.first_bucket_cap_bytes, 0);
}

ZeroStrategy::~ZeroStrategy() = default;

std::string ZeroStrategy::name() const {
  return options_.stage == 1 ? "zero1" : "zero2";
}

bool ZeroStrategy::communicating() const {
  return communicator_ != nullptr && communicator_->world_size() > 1;
}



std::string ZeroStrategy::Describe() const {
  const bool every = options_.grad_sync == GradSync::kEvery;
  const std::string fault = SyncTestFaultName(options_.testonly_fault);
  return absl::StrCat(
      name(), ": ", pieces_.size(), " bucket(s) of ",
      Mib(store_ == nullptr ? 0 : store_->numel() * kFp32Bytes), " (first ",
      Mib(options_.first_bucket_cap_bytes), ", then ",
      Mib(options_.bucket_cap_bytes),
      ") in reverse layout order; each bucket's reduce-scatter (avg) launched "
      "from gradient-accumulator hooks as soon as it is complete, AdamW on "
      "this rank's shard (",
      shard_numel(), " of ", store_ == nullptr ? 0 : store_->numel(),
      " elements), then the updated parameters all-gathered bucket by "
      "bucket; ",
      options_.stage == 1 ? "gradients replicated, optimizer state sharded"
                          : "gradients and optimizer state sharded",
      "; grad_sync=", every ? "every" : "last",
      options_.stage == 2 && !every
          ? " (zero2 with grad_sync=last keeps full gradients across "
            "micro-batches: only the last one's backward reduce-scatters)"
          : "",
      communicating() ? "" : "; one rank: no communication",
      fault.empty() ? "" : absl::StrCat("; TEST-ONLY FAULT ", fault));
}

absl::Status ZeroStrategy::Setup(ParameterStore& store,
                                 const AdamWOptions& optimizer) {
  store_ = &store;
  if (keeps_full_gradients()) {
    store.AttachGradients();
  } else {
    store.DetachGradients();
  }
  std::vector<GradientBucket> buckets = AssignGradientBuckets(
      store, options_.first_bucket_cap_bytes, options_.bucket_cap_bytes);
  const int n = world_size();
  const int rank = communicator_ == nullptr ? 0 : communicator_->rank();
  pieces_ = std::vector<Piece>(buckets.size());
  std::vector<FlatAdamW::Range> ranges;
  // zero1 with one sync per step reduces in place into the flat gradient.
  const bool in_place =
      keeps_full_gradients() && options_.grad_sync == GradSync::kLast;
  for (size_t b = 0; b < buckets.size(); ++b) {
    Piece& piece = pieces_[b];
    piece.counts = EvenCounts(buckets[b].numel, n);
    for (int p = 0; p < rank; ++p) piece.shard_offset += piece.counts[p];
    piece.shard_numel = piece.counts[rank];
    const int64_t flat_offset = buckets[b].offset + piece.shard_offset;
    piece.grad_shard =
        in_place ? store.flat_gradients().narrow(0, flat_offset,
                                                 piece.shard_numel)
                 : at::zeros({piece.shard_numel}, at::kFloat);
    ranges.push_back({flat_offset, piece.shard_numel});
  }
  optimizer_ = std::make_unique<FlatAdamW>(
      store, std::move(ranges), optimizer,
      std::max<int64_t>(1, options_.bucket_cap_bytes / kFp32Bytes));
  engine_.Setup(store, std::move(buckets),
                [this](int bucket) { LaunchBucket(bucket); });
  if (!keeps_full_gradients()) {
    // Autograd allocates each .grad (no flat buffer): a memory mark.
    engine_.set_on_gradient([this](int parameter) {
      MarkMemory("zero: gradient accumulated for parameter", parameter);
    });
  }
  fault_bucket_ = -1;
  const SyncTestFault& fault = options_.testonly_fault;
  if (fault.kind == SyncTestFault::Kind::kBucketNeverSynced) {
    if (fault.bucket >= static_cast<int>(pieces_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--testonly_sync_fault=", SyncTestFaultName(fault), ": there are ",
          pieces_.size(), " buckets (0..", pieces_.size() - 1, ")"));
    }
    fault_bucket_ = fault.bucket;
  }
  if (communicating()) {
    RETURN_IF_ERROR(CheckSameParametersOnEveryRank(*communicator_, store, name()));
    RETURN_IF_ERROR(BroadcastParametersFromRankZero(*communicator_, store,
                                                    engine_.buckets(), name()));
  }
  sync_in_flight_ = false;
  return absl::OkStatus();
}

void ZeroStrategy::ZeroGradients() {
  if (keeps_full_gradients()) {
    store_->ZeroGradients();
  } else {
    for (const NamedParameter& p : store_->parameters()) {
      p.tensor.mutable_grad() = at::Tensor();
    }
    fault_kept_gradients_.clear();
  }
}

absl::Status ZeroStrategy::BeforeBackward(int micro_batch, int micro_batches) {
  CHECK(store_ != nullptr) << "Setup first";
  if (micro_batch == 0) ResetStepFigures();
  // Under --grad_sync=every the previous micro-batch's reduce-scatters must
  // have landed (and zero1's flat gradient been cleared) before this
  // backward accumulates.
  RETURN_IF_ERROR(FinishSync());
  const bool last = micro_batch == micro_batches - 1;
  if (options_.grad_sync == GradSync::kEvery || last) {
    accumulate_ = syncs_ > 0;
    zero_after_sync_ = keeps_full_gradients() && !last;
    bytes_at_arm_ =
        communicating() ? communicator_->log().Totals().bytes_sent : 0;
    for (Piece& piece : pieces_) piece.finished = false;
    engine_.Arm();
    sync_in_flight_ = true;
  }
  return absl::OkStatus();
}

void ZeroStrategy::ResetStepFigures() {
  bytes_sent_ = 0;
  gather_bytes_sent_ = 0;
  wait_ms_ = 0;
  syncs_ = 0;
}

absl::Status ZeroStrategy::BeforeLocalBackward(int chunk, int) {
  CHECK(store_ != nullptr) << "Setup first";
  if (chunk == 0) ResetStepFigures();
  return FinishSync();  // the engine stays disarmed: nothing launches
}

std::vector<ExactGroup> ZeroStrategy::ExactGroups() {
  std::vector<ExactGroup> groups;
  for (size_t b = 0; b < pieces_.size(); ++b) {
    const GradientBucket& bucket = engine_.buckets()[b];
    ExactGroup group;
    group.offset = bucket.offset;
    group.numel = bucket.numel;
    group.counts = pieces_[b].counts;
    group.destination = pieces_[b].grad_shard;
    groups.push_back(std::move(group));
  }
  return groups;
}

void ZeroStrategy::StageBucket(int index) {
  const GradientBucket& bucket = engine_.buckets()[index];
  Piece& piece = pieces_[index];
  piece.staging = at::empty({bucket.numel}, at::kFloat);
  MarkMemory("zero: staging allocated for bucket", index);
  const bool keep =
      options_.testonly_fault.kind == SyncTestFault::Kind::kKeepFullGradients;
  for (int parameter : bucket.parameters) {
    at::Tensor& grad = store_->parameters()[parameter].tensor.mutable_grad();
    piece.staging
        .narrow(0, store_->offset(parameter) - bucket.offset, grad.numel())
        .copy_(grad.view({-1}));
    if (keep) fault_kept_gradients_.push_back(grad);  // test fault
    grad = at::Tensor();  // the full gradient is freed as soon as copied
  }
  MarkMemory("zero: full gradients freed for bucket", index);
}

void ZeroStrategy::LaunchBucket(int index) {
  at::NoGradGuard no_grad;
  // Bound what is in flight: bucket index - kInFlightBuckets finishes first
  // (inside backward), freeing its staging and the collective's temporaries
  // before this bucket allocates its own.
  if (index >= static_cast<int>(kInFlightBuckets)) {
    const absl::Status finished =
        FinishBucket(index - static_cast<int>(kInFlightBuckets));
    if (!finished.ok() && hook_error_.ok()) hook_error_ = finished;
  }
  const GradientBucket& bucket = engine_.buckets()[index];
  Piece& piece = pieces_[index];
  at::Tensor input;
  if (keeps_full_gradients()) {
    input = store_->flat_gradients().narrow(0, bucket.offset, bucket.numel);
  } else {
    StageBucket(index);
    input = piece.staging;
  }
  if (accumulate_ && !piece.incoming.defined()) {
    piece.incoming = at::empty({piece.shard_numel}, at::kFloat);
    MarkMemory("zero: reduce-scatter output allocated for bucket", index);
  }
  const at::Tensor& output = accumulate_ ? piece.incoming : piece.grad_shard;
  if (!communicating() || index == fault_bucket_) {
    // One rank: the average of one gradient is itself. Test fault
    // bucket_never_synced: every rank keeps its local values (and skips the
    // collective, so the ranks still issue the same ones).
    const at::Tensor local =
        input.narrow(0, piece.shard_offset, piece.shard_numel);
    if (output.data_ptr() != local.data_ptr()) output.copy_(local);
    if (piece.staging.defined()) {
      piece.staging = at::Tensor();
      MarkMemory("zero: staging freed for bucket", index);
    }
    return;
  }
  const bool sum_fault =
      options_.testonly_fault.kind == SyncTestFault::Kind::kSumNotAverage;
  piece.handle = communicator_->ReduceScatterVAsync(
      input, output, piece.counts,
      sum_fault ? collective::ReduceOp::kSum : collective::ReduceOp::kAvg);
  piece.in_flight = true;
  MarkMemory("zero: reduce-scatter launched for bucket", index);
}

absl::Status ZeroStrategy::FinishBucket(int index) {
  Piece& piece = pieces_[index];
  if (piece.finished) return absl::OkStatus();
  piece.finished = true;
  at::NoGradGuard no_grad;
  if (piece.in_flight) {
    piece.in_flight = false;
    const Stopwatch watch;
    const absl::Status waited = piece.handle.Wait();
    wait_ms_ += watch.ElapsedMs();
    piece.handle = collective::CollectiveHandle();
    RETURN_IF_ERROR(Annotate(
        waited,
        absl::StrCat(name(), ": gradient reduce-scatter of bucket ", index)));
  }
  piece.staging = at::Tensor();
  if (accumulate_) piece.grad_shard.add_(piece.incoming);
  if (zero_after_sync_) {
    const GradientBucket& bucket = engine_.buckets()[index];
    store_->flat_gradients().narrow(0, bucket.offset, bucket.numel).zero_();
  }
  MarkMemory("zero: reduce-scatter finished for bucket", index);
  return absl::OkStatus();
}

absl::Status ZeroStrategy::FinishSync() {
  if (!sync_in_flight_) return absl::OkStatus();
  sync_in_flight_ = false;
  engine_.Disarm();
  RETURN_IF_ERROR(hook_error_);
  RETURN_IF_ERROR(engine_.CheckAllLaunched(name()));
  ++syncs_;
  for (size_t b = 0; b < pieces_.size(); ++b) {
    RETURN_IF_ERROR(FinishBucket(static_cast<int>(b)));
  }
  // The reduce-scatter outputs live only for one sync.
  for (Piece& piece : pieces_) piece.incoming = at::Tensor();
  MarkMemory("zero: reduce-scatter outputs freed");
  if (communicating()) {
    bytes_sent_ += communicator_->log().Totals().bytes_sent - bytes_at_arm_;
  }
  return absl::OkStatus();
}

absl::Status ZeroStrategy::AfterBackward() { return FinishSync(); }

StepCommunication ZeroStrategy::TakeStepCommunication() {
  StepCommunication step;
  step.wait_ms = wait_ms_;
  step.syncs = syncs_;
  step.bytes_sent = bytes_sent_;
  step.gather_bytes_sent = gather_bytes_sent_;
  if (communicating()) {
    // The layer's byte model of each piece's collectives, summed: per sync,
    // a reduce-scatter sends every other rank's shard; the gather sends this
    // rank's shard to the n-1 others. When n divides every bucket that is
    // (n-1)/n * 4 * (S * P + P), S syncs and P parameters.
    const int rank = communicator_->rank();
    int64_t reduce_scatter = 0;
    int64_t all_gather = 0;
    for (const Piece& piece : pieces_) {
      reduce_scatter +=
          collective::ReduceScatterVTraffic(piece.counts, kFp32Bytes, rank)
              .sent;
      all_gather +=
          collective::AllGatherVTraffic(piece.counts, kFp32Bytes, rank).sent;
    }
    step.expected_bytes = syncs_ * reduce_scatter;
    step.expected_gather_bytes = all_gather;
  }
  return step;
}

std::vector<BucketSummary> ZeroStrategy::Buckets() const {
  return engine_.Summaries();
}

absl::StatusOr<double> ZeroStrategy::GlobalGradNorm() {
  double sum_of_squares = 0;
  for (size_t b = 0; b < pieces_.size(); ++b) {
    const Piece& piece = pieces_[b];
    sum_of_squares += store_->SquaredNormCounted(
        piece.grad_shard, engine_.buckets()[b].offset + piece.shard_offset);
  }
  ASSIGN_OR_RETURN(const double total,
                   ReduceScalarOverRanks(communicator_, sum_of_squares,
                                         ScalarReduction::kSum, name()));
  return std::sqrt(total);
}

absl::Status ZeroStrategy::ScaleGradients(double factor) {
  at::NoGradGuard no_grad;
  for (Piece& piece : pieces_) piece.grad_shard.mul_(factor);
  return absl::OkStatus();
}



absl::Status ZeroStrategy::OptimizerStep(double lr, double gradient_scale) {
  // Clipping: 1 when the norm is within the limit.
  if (gradient_scale != 1) RETURN_IF_ERROR(ScaleGradients(gradient_scale));
  std::vector<at::Tensor> grads;
  for (const Piece& piece : pieces_) grads.push_back(piece.grad_shard);
  optimizer_->Step(lr, grads);
  MarkMemory("zero: shards updated");
  if (!communicating()) return absl::OkStatus();
  at::NoGradGuard no_grad;
  const int64_t before = communicator_->log().Totals().bytes_sent;
  const at::Tensor& flat = store_->flat_parameters();
  // Bucket by bucket, at most kInFlightBuckets at once: each gather's
  // temporary (its input repeated n times, about a bucket) stays bounded.
  std::vector<collective::CollectiveHandle> handles(pieces_.size());
  auto wait = [&](size_t b) -> absl::Status {
    const Stopwatch watch;
    const absl::Status waited = handles[b].Wait();
    wait_ms_ += watch.ElapsedMs();
    handles[b] = collective::CollectiveHandle();
    return Annotate(
        waited,
        absl::StrCat(name(), ": all-gather of updated parameters (bucket ", b,
                     ")"));
  };
  for (size_t b = 0; b < pieces_.size(); ++b) {
    if (b >= kInFlightBuckets) {
      RETURN_IF_ERROR(wait(b - kInFlightBuckets));
      MarkMemory("zero: all-gather finished for bucket",
                 static_cast<int>(b - kInFlightBuckets));
    }
    const GradientBucket& bucket = engine_.buckets()[b];
    const Piece& piece = pieces_[b];
    // In place: this rank's shard is its own slot of the bucket.
    handles[b] = communicator_->AllGatherVAsync(
        flat.narrow(0, bucket.offset + piece.shard_offset, piece.shard_numel),
        flat.narrow(0, bucket.offset, bucket.numel), piece.counts);
    MarkMemory("zero: all-gather launched for bucket", static_cast<int>(b));
  }
  for (size_t b = pieces_.size() >= kInFlightBuckets
                      ? pieces_.size() - kInFlightBuckets
                      : 0;
       b < pieces_.size(); ++b) {
    RETURN_IF_ERROR(wait(b));
    MarkMemory("zero: all-gather finished for bucket", static_cast<int>(b));
  }
  gather_bytes_sent_ += communicator_->log().Totals().bytes_sent - before;
  return absl::OkStatus();
}

HeldMemory ZeroStrategy::Held() const {
  HeldMemory held;
  const at::Tensor& flat_gradients = store_->flat_gradients();
  held.parameters = StorageBytes(store_->flat_parameters());
  held.gradients = StorageBytes(flat_gradients);
  for (const Piece& piece : pieces_) {
    if (!flat_gradients.defined() || !piece.grad_shard.is_alias_of(flat_gradients)) {
      held.gradients += StorageBytes(piece.grad_shard);
    }
    held.collective_temporaries +=
        StorageBytes(piece.staging) + StorageBytes(piece.incoming);
  }
  if (communicating()) {
    held.collective_temporaries += communicator_->TemporaryBytes();
  }
  for (const at::Tensor& grad : fault_kept_gradients_) {
    held.gradients += StorageBytes(grad);
  }
  // zero1's .grad tensors are views of the flat buffer (AttachGradients);
  // only zero2's are tensors of their own. Skipping the walk for zero1 keeps
  // its ~4 marks per bucket cheap (a .grad that somehow left the buffer
  // would still show, as unattributed).
  if (!keeps_full_gradients()) {
    for (const NamedParameter& p : store_->parameters()) {
      const at::Tensor& grad = p.tensor.grad();
      if (grad.defined() &&
          (!flat_gradients.defined() || !grad.is_alias_of(flat_gradients))) {
        held.gradients += StorageBytes(grad);
      }
    }
  }
  held.optimizer_state = optimizer_->state_bytes();
  return held;
}

std::vector<StatePiece> ZeroStrategy::CheckpointPiecesToSave() const {
  // This rank's shard of every bucket: its parameters (the shard it
  // updates; every rank holds the same values after the gather) and its
  // AdamW state, split per parameter.
  std::vector<StatePiece> pieces = ModelPieces(*store_, optimizer_->ranges());
  std::vector<StatePiece> state =
      OptimizerPieces(*store_, *optimizer_, optimizer_->ranges());
  pieces.insert(pieces.end(), state.begin(), state.end());
  if (communicator_ == nullptr || communicator_->rank() == 0) {
    pieces.push_back(OptimizerStepPiece(*optimizer_));
  }
  return pieces;
}

std::vector<StatePiece> ZeroStrategy::CheckpointPiecesToLoad() {
  // Every rank holds the whole model, but only its shard of the state.
  std::vector<StatePiece> pieces = ModelPieces(*store_, {{0, store_->numel()}});
  std::vector<StatePiece> state =
      OptimizerPieces(*store_, *optimizer_, optimizer_->ranges());
  pieces.insert(pieces.end(), state.begin(), state.end());
  pieces.push_back(OptimizerStepPiece(*optimizer_));
  return pieces;
}

int64_t ZeroStrategy::shard_numel() const {
  int64_t total = 0;
  for (const Piece& piece : pieces_) total += piece.shard_numel;
  return total;
}

int64_t ZeroStrategy::optimizer_state_bytes() const {
  return optimizer_ == nullptr ? 0 : optimizer_->state_bytes();
}

}  // namespace mtb
