// DDP's gradient synchronisation. Vocabulary:
//
//   ready order   the order in which backward produces parameter gradients;
//                 approximated by reverse layout order of the parameter store
//                 (trainer/model/parameter_store.h).
//   bucket        a run of consecutive parameters in ready order: a slice of
//                 the parameter store's flat gradient buffer (as PyTorch's
//                 gradient_as_bucket_view), so the gradients are reduced where
//                 backward accumulated them, with no copy in or out; bucket 0
//                 holds the gradients backward produces first (the last
//                 block). Sizes follow PyTorch (buckets.h): 1 MiB, then
//                 bucket_cap. The engine (bucket_engine.h) is shared with
//                 zero1 and zero2.
//   hook          a post hook on a parameter's gradient accumulator: it runs
//                 right after backward has accumulated that parameter's
//                 gradient into .grad (LibTorch 1.13 has no
//                 post-accumulate-grad hook; the accumulator's post hook is
//                 what c10d's Reducer uses too).
//   pending       per bucket, the gradients not yet accumulated in this
//                 backward; at 0 the bucket is ready.
//   launch        start an asynchronous in-place all-reduce (average) of the
//                 bucket's slice through our
//                 collective layer (common/collective). Buckets launch strictly in
//                 index order: a ready bucket waits for the ones before it, so
//                 every rank issues the same collectives in the same order (a
//                 mismatch would pair different buckets across ranks).
//   sync          one backward whose hooks launch all buckets; AfterBackward
//                 (or the next micro-batch's BeforeBackward under
//                 --grad_sync=every) waits for them — the time blocked there
//                 is the step's communication wait; .grad is a view of the
//                 slice, so the averages are already there.
//
// no_sync: under --grad_sync=last, micro-batches 0..K-2 run backward without
// launching anything (gradients accumulate locally) and only the last one
// syncs: the average of the accumulated sums is the average of the total.
// Under every, micro-batch m's sync averages (average of 0..m-1) + local m,
// which is the same total, with K times the bytes.
//
// Why not c10d::Reducer: (1) Debian's LibTorch 1.13 lacks a
// header reducer.hpp includes (distributed/autograd/context/context.h), so it
// needs a shim; (2) its all-reduces go straight to the ProcessGroup, bypassing
// our collective layer's byte counting, records, timeouts and error messages
// unless every bucket is routed back through a C++ comm hook, which leaves
// Reducer doing only what this file does in ~150 lines; (3) it rebuilds its
// buckets after the first iteration from the observed ready order, so with 3+
// ranks the reduction order changes after step 1 and runs are harder to
// compare. Our buckets are fixed at Setup, in reverse layout order.
#include "trainer/strategy/ddp.h"

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
#include "trainer/strategy/buckets.h"
#include "trainer/strategy/replicas.h"
#include "trainer/model/state_pieces.h"
#include "trainer/strategy/scalars.h"

namespace mtb {

namespace {

constexpr int64_t kFp32Bytes = 4;

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.3g MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

DdpOptions DdpOptionsFromConfig(double bucket_cap_mb,
                                const std::string& grad_sync) {
  DdpOptions options;
  options.bucket_cap_bytes = BucketCapBytes(bucket_cap_mb);
  options.grad_sync = GradSyncFromName(grad_sync);
  return options;
}

DdpStrategy::DdpStrategy(collective::Communicator* communicator,
                         const DdpOptions& options)
    : communicator_(communicator), options_(options) {
  CHECK_GT(options_.bucket_cap_bytes, 0);
  CHECK_GT(options_.first_bucket_cap_bytes, 0);
}

DdpStrategy::~DdpStrategy() = default;

bool DdpStrategy::communicating() const {
  return communicator_ != nullptr && communicator_->world_size() > 1;
}



std::string DdpStrategy::Describe() const {
  return absl::StrCat(
      "ddp: ", engine_.buckets().size(), " gradient bucket(s) of ", Mib(gradient_bytes_),
      " (first ", Mib(options_.first_bucket_cap_bytes), ", then ",
      Mib(options_.bucket_cap_bytes),
      ") in reverse layout order; each bucket's all-reduce (avg) launched ",
      options_.overlap ? "from gradient-accumulator hooks as soon as it is complete"
                       : "after backward (--ddp_overlap=false: no overlap)",
      ", in bucket order, all waited before the optimizer; grad_sync=",
      options_.grad_sync == GradSync::kEvery ? "every" : "last",
      communicating() ? "" : "; one rank: no communication",
      " (own bucketing, not c10d::Reducer; buckets are views of the flat "
      "gradient buffer)",
      options_.testonly_fault.kind == SyncTestFault::Kind::kNone
          ? ""
          : absl::StrCat("; TEST-ONLY FAULT ",
                         SyncTestFaultName(options_.testonly_fault)));
}

absl::Status DdpStrategy::Setup(ParameterStore& store,
                                const AdamWOptions& optimizer) {
  store_ = &store;
  store.AttachGradients();
  optimizer_ = std::make_unique<FlatAdamW>(
      store, std::vector<FlatAdamW::Range>{{0, store.numel()}}, optimizer,
      std::max<int64_t>(1, options_.bucket_cap_bytes / kFp32Bytes));
  gradient_bytes_ = store.numel() * kFp32Bytes;
  std::vector<GradientBucket> buckets = AssignGradientBuckets(
      store, options_.first_bucket_cap_bytes, options_.bucket_cap_bytes);
  handles_.assign(buckets.size(), collective::CollectiveHandle());
  engine_.Setup(store, std::move(buckets),
                [this](int bucket) { LaunchBucket(bucket); });
  engine_.set_deferred(!options_.overlap);
  RETURN_IF_ERROR(ResolveTestFault());
  if (communicating()) {
    RETURN_IF_ERROR(CheckSameParametersOnEveryRank(*communicator_, store, "ddp"));
    RETURN_IF_ERROR(BroadcastParametersFromRankZero(*communicator_, store,
                                                    engine_.buckets(), "ddp"));
  }
  sync_in_flight_ = false;
  return absl::OkStatus();
}

void DdpStrategy::ZeroGradients() { store_->ZeroGradients(); }

absl::Status DdpStrategy::ResolveTestFault() {
  const SyncTestFault& fault = options_.testonly_fault;
  const size_t buckets = engine_.buckets().size();
  fault_bucket_ = -1;
  fault_parameter_ = -1;
  if (fault.kind == SyncTestFault::Kind::kBucketNeverSynced) {
    if (fault.bucket >= static_cast<int>(buckets)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--testonly_sync_fault=", SyncTestFaultName(fault), ": there are ",
          buckets, " buckets (0..", buckets - 1, ")"));
    }
    fault_bucket_ = fault.bucket;
  }
  if (fault.kind == SyncTestFault::Kind::kParameterUnreduced) {
    const std::vector<NamedParameter>& parameters = store_->parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (parameters[i].name == fault.parameter) {
        fault_parameter_ = static_cast<int>(i);
      }
    }
    if (fault_parameter_ < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--testonly_sync_fault=", SyncTestFaultName(fault),
                       ": the model has no parameter of that name"));
    }
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::BeforeBackward(int micro_batch, int micro_batches) {
  CHECK(store_ != nullptr) << "Setup first";
  if (micro_batch == 0) {
    bytes_sent_ = 0;
    wait_ms_ = 0;
    syncs_ = 0;
  }
  // Under --grad_sync=every the previous micro-batch's averages must be in
  // .grad before this backward accumulates onto them.
  RETURN_IF_ERROR(FinishSync());
  if (options_.grad_sync == GradSync::kEvery ||
      micro_batch == micro_batches - 1) {
    for (collective::CollectiveHandle& handle : handles_) {
      handle = collective::CollectiveHandle();
    }
    // Only the bucket all-reduces are issued between here and FinishSync's
    // end, so the totals' difference is theirs.
    bytes_at_arm_ =
        communicating() ? communicator_->log().Totals().bytes_sent : 0;
    engine_.Arm();
    sync_in_flight_ = true;
  }
  return absl::OkStatus();
}

void DdpStrategy::LaunchBucket(int index) {
  if (!communicating()) return;  // one rank: .grad is the average already
  if (index == fault_bucket_) return;  // test fault: never synchronised
  at::NoGradGuard no_grad;
  const GradientBucket& bucket = engine_.buckets()[index];
  if (fault_parameter_ >= 0 && engine_.bucket_of(fault_parameter_) == index) {
    fault_local_gradient_ =
        store_->parameters()[fault_parameter_].tensor.grad().clone();
    MarkMemory("ddp: test fault kept a local gradient");
  }
  const bool sum_fault =
      options_.testonly_fault.kind == SyncTestFault::Kind::kSumNotAverage;
  handles_[index] = communicator_->AllReduceAsync(
      store_->flat_gradients().narrow(0, bucket.offset, bucket.numel),
      sum_fault ? collective::ReduceOp::kSum : collective::ReduceOp::kAvg);
}

absl::Status DdpStrategy::FinishSync() {
  if (!sync_in_flight_) return absl::OkStatus();
  sync_in_flight_ = false;
  engine_.LaunchDeferred();  // --ddp_overlap=false: now, in bucket order
  engine_.Disarm();
  RETURN_IF_ERROR(engine_.CheckAllLaunched("ddp"));
  ++syncs_;
  if (!communicating()) return absl::OkStatus();
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < handles_.size(); ++b) {
    if (static_cast<int>(b) == fault_bucket_) continue;  // test fault
    const Stopwatch watch;
    const absl::Status waited = handles_[b].Wait();
    wait_ms_ += watch.ElapsedMs();
    RETURN_IF_ERROR(Annotate(
        waited, absl::StrCat("ddp: gradient all-reduce of bucket ", b)));
    handles_[b] = collective::CollectiveHandle();
  }
  bytes_sent_ += communicator_->log().Totals().bytes_sent - bytes_at_arm_;
  if (fault_local_gradient_.defined()) {  // test fault: keep the local one
    store_->parameters()[fault_parameter_].tensor.mutable_grad().copy_(
        fault_local_gradient_);
    fault_local_gradient_ = at::Tensor();
    MarkMemory("ddp: test fault released a local gradient");
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::AfterBackward() { return FinishSync(); }

absl::Status DdpStrategy::BeforeLocalBackward(int chunk, int) {
  CHECK(store_ != nullptr) << "Setup first";
  if (chunk == 0) {
    bytes_sent_ = 0;
    wait_ms_ = 0;
    syncs_ = 0;
  }
  return FinishSync();  // the engine stays disarmed: nothing launches
}

std::vector<ExactGroup> DdpStrategy::ExactGroups() {
  std::vector<ExactGroup> groups;
  for (const GradientBucket& bucket : engine_.buckets()) {
    ExactGroup group;
    group.offset = bucket.offset;
    group.numel = bucket.numel;
    group.destination =
        store_->flat_gradients().narrow(0, bucket.offset, bucket.numel);
    groups.push_back(std::move(group));
  }
  return groups;
}

StepCommunication DdpStrategy::TakeStepCommunication() {
  StepCommunication step;
  step.wait_ms = wait_ms_;
  step.syncs = syncs_;
  step.bytes_sent = bytes_sent_;
  // The layer's byte model of one all-reduce of every gradient; the buckets'
  // records round each bucket down, so they may count up to one byte less
  // per bucket.
  step.expected_bytes =
      syncs_ * collective::AllReduceTraffic(gradient_bytes_, world_size()).sent;
  return step;
}

std::vector<BucketSummary> DdpStrategy::Buckets() const {
  return engine_.Summaries();
}

absl::StatusOr<double> DdpStrategy::GlobalGradNorm() {
  return GradNorm(store_->parameters());
}

absl::Status DdpStrategy::ScaleGradients(double factor) {
  at::NoGradGuard no_grad;
  store_->flat_gradients().mul_(factor);
  return absl::OkStatus();
}



HeldMemory DdpStrategy::Held() const {
  HeldMemory held;
  held.parameters = StorageBytes(store_->flat_parameters());
  // The buckets are views of the flat gradient buffer: nothing else.
  held.gradients = StorageBytes(store_->flat_gradients());
  held.optimizer_state = optimizer_->state_bytes();
  // In-place all-reduces allocate nothing for fp32; an emulated (bf16)
  // transport would show here.
  held.collective_temporaries =
      StorageBytes(fault_local_gradient_) +
      (communicating() ? communicator_->TemporaryBytes() : 0);
  return held;
}

absl::Status DdpStrategy::OptimizerStep(double lr, double gradient_scale) {
  // Clipping: 1 when the norm is within the limit.
  if (gradient_scale != 1) RETURN_IF_ERROR(ScaleGradients(gradient_scale));
  optimizer_->Step(lr, {store_->flat_gradients()});
  return absl::OkStatus();
}

std::vector<StatePiece> DdpStrategy::CheckpointPiecesToSave() const {
  const int rank = communicator_ == nullptr ? 0 : communicator_->rank();
  const std::vector<FlatRange> slice = {
      EvenSlice(store_->numel(), world_size(), rank)};
  std::vector<StatePiece> pieces = ModelPieces(*store_, slice);
  std::vector<StatePiece> state = OptimizerPieces(*store_, *optimizer_, slice);
  pieces.insert(pieces.end(), state.begin(), state.end());
  if (rank == 0) pieces.push_back(OptimizerStepPiece(*optimizer_));
  return pieces;
}

std::vector<StatePiece> DdpStrategy::CheckpointPiecesToLoad() {
  const std::vector<FlatRange> all = {{0, store_->numel()}};
  std::vector<StatePiece> pieces = ModelPieces(*store_, all);
  std::vector<StatePiece> state = OptimizerPieces(*store_, *optimizer_, all);
  pieces.insert(pieces.end(), state.begin(), state.end());
  pieces.push_back(OptimizerStepPiece(*optimizer_));
  return pieces;
}

}  // namespace mtb
