// DDP's gradient synchronisation. Vocabulary:
//
//   ready order   the order in which backward produces parameter gradients;
//                 approximated by reverse parameter order (the model's
//                 parameters are listed in forward order, trainer/model.h).
//   bucket        a run of consecutive parameters in ready order, with one
//                 flat fp32 buffer of their gradients; bucket 0 holds the
//                 gradients backward produces first (ln_f, the last block).
//                 Sizes follow PyTorch (buckets.h): 1 MiB, then bucket_cap.
//   hook          a post hook on a parameter's gradient accumulator: it runs
//                 right after backward has accumulated that parameter's
//                 gradient into .grad (LibTorch 1.13 has no
//                 post-accumulate-grad hook; the accumulator's post hook is
//                 what c10d's Reducer uses too).
//   pending       per bucket, the gradients not yet accumulated in this
//                 backward; at 0 the bucket is ready.
//   launch        copy the bucket's gradients into its flat buffer and start
//                 an asynchronous all-reduce (average) of it through our
//                 collective layer (common/collective). Buckets launch strictly in
//                 index order: a ready bucket waits for the ones before it, so
//                 every rank issues the same collectives in the same order (a
//                 mismatch would pair different buckets across ranks).
//   sync          one backward whose hooks launch all buckets; AfterBackward
//                 (or the next micro-batch's BeforeBackward under
//                 --grad_sync=every) waits for them — the time blocked there
//                 is the step's communication wait — and copies the averages
//                 back into .grad.
//
// no_sync: under --grad_sync=last, micro-batches 0..K-2 run backward without
// launching anything (gradients accumulate locally) and only the last one
// syncs: the average of the accumulated sums is the average of the total.
// Under every, micro-batch m's sync averages (average of 0..m-1) + local m,
// which is the same total, with K times the bytes.
//
// Why not c10d::Reducer (TOOLCHAIN.md): (1) Debian's LibTorch 1.13 lacks a
// header reducer.hpp includes (distributed/autograd/context/context.h), so it
// needs a shim; (2) its all-reduces go straight to the ProcessGroup, bypassing
// our collective layer's byte counting, records, timeouts and error messages
// unless every bucket is routed back through a C++ comm hook, which leaves
// Reducer doing only what this file does in ~150 lines; (3) it rebuilds its
// buckets after the first iteration from the observed ready order, so with 3+
// ranks the reduction order changes after step 1 and runs are harder to
// compare. Our buckets are fixed at Setup, in reverse parameter order.
#include "trainer/strategy/ddp.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status.h"
#include "common/collective/traffic.h"
#include "glog/logging.h"
#include "torch/csrc/autograd/function.h"
#include "torch/csrc/autograd/utils/lambda_post_hook.h"
#include "torch/csrc/autograd/variable.h"
#include "trainer/metrics.h"
#include "trainer/strategy/buckets.h"

namespace mtb {

struct DdpStrategy::Bucket {
  std::vector<int> parameters;  // indices into parameters_, in ready order
  std::vector<int64_t> offsets;  // element offset of each in `flat`
  int64_t numel = 0;
  at::Tensor flat;  // (numel) fp32
  int pending = 0;
  collective::CollectiveHandle handle;
};

namespace {

constexpr int64_t kFp32Bytes = 4;

// FNV-1a over the names and shapes: one number that differs when the
// parameter lists differ.
int64_t LayoutHash(const std::vector<NamedParameter>& parameters) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](const std::string& text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  for (const NamedParameter& p : parameters) {
    mix(p.name);
    for (int64_t size : p.tensor.sizes()) mix(absl::StrCat(":", size));
    mix(";");
  }
  return static_cast<int64_t>(hash);
}

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.3g MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

absl::StatusOr<DdpTestFault> ParseDdpTestFault(const std::string& text) {
  DdpTestFault fault;
  if (text.empty()) return fault;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string argument =
      colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "sum_not_average" && colon == std::string::npos) {
    fault.kind = DdpTestFault::Kind::kSumNotAverage;
    return fault;
  }
  if (kind == "bucket_never_synced" &&
      absl::SimpleAtoi(argument, &fault.bucket) && fault.bucket >= 0) {
    fault.kind = DdpTestFault::Kind::kBucketNeverSynced;
    return fault;
  }
  if (kind == "parameter_unreduced" && !argument.empty()) {
    fault.kind = DdpTestFault::Kind::kParameterUnreduced;
    fault.parameter = argument;
    return fault;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--testonly_ddp_fault=", text,
      ": expected sum_not_average, bucket_never_synced:<bucket index> or "
      "parameter_unreduced:<parameter name>"));
}

std::string DdpTestFaultName(const DdpTestFault& fault) {
  switch (fault.kind) {
    case DdpTestFault::Kind::kNone:
      return "";
    case DdpTestFault::Kind::kSumNotAverage:
      return "sum_not_average";
    case DdpTestFault::Kind::kBucketNeverSynced:
      return absl::StrCat("bucket_never_synced:", fault.bucket);
    case DdpTestFault::Kind::kParameterUnreduced:
      return absl::StrCat("parameter_unreduced:", fault.parameter);
  }
  return "";
}

GradSync GradSyncFromName(const std::string& name) {
  CHECK(name == "every" || name == "last") << name;
  return name == "every" ? GradSync::kEvery : GradSync::kLast;
}

DdpOptions DdpOptionsFromConfig(double bucket_cap_mb,
                                const std::string& grad_sync) {
  DdpOptions options;
  options.bucket_cap_bytes =
      std::max<int64_t>(1, std::llround(bucket_cap_mb * (1 << 20)));
  options.grad_sync = GradSyncFromName(grad_sync);
  return options;
}

DdpStrategy::DdpStrategy(collective::Communicator* communicator,
                         const DdpOptions& options)
    : communicator_(communicator), options_(options) {
  CHECK_GT(options_.bucket_cap_bytes, 0);
  CHECK_GT(options_.first_bucket_cap_bytes, 0);
}

DdpStrategy::~DdpStrategy() { RemoveHooks(); }

bool DdpStrategy::communicating() const {
  return communicator_ != nullptr && communicator_->world_size() > 1;
}

int DdpStrategy::world_size() const {
  return communicator_ == nullptr ? 1 : communicator_->world_size();
}

std::string DdpStrategy::backend() const {
  return communicating() ? std::string(communicator_->backend()) : "none";
}

std::string DdpStrategy::Describe() const {
  return absl::StrCat(
      "ddp: ", buckets_.size(), " gradient bucket(s) of ", Mib(gradient_bytes_),
      " (first ", Mib(options_.first_bucket_cap_bytes), ", then ",
      Mib(options_.bucket_cap_bytes),
      ") in reverse parameter order; each bucket's all-reduce (avg) launched "
      "from gradient-accumulator hooks as soon as it is complete, in bucket "
      "order, all waited before the optimizer; grad_sync=",
      options_.grad_sync == GradSync::kEvery ? "every" : "last",
      communicating() ? "" : "; one rank: no communication",
      " (own bucketing, not c10d::Reducer)",
      options_.testonly_fault.kind == DdpTestFault::Kind::kNone
          ? ""
          : absl::StrCat("; TEST-ONLY FAULT ",
                         DdpTestFaultName(options_.testonly_fault)));
}

void DdpStrategy::RemoveHooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
  accumulators_.clear();
  hook_keys_.clear();
}

absl::Status DdpStrategy::Setup(const std::vector<NamedParameter>& parameters,
                                const AdamWOptions& optimizer) {
  RemoveHooks();
  parameters_ = parameters;
  optimizer_ = std::make_unique<AdamW>(parameters, optimizer);
  const int count = static_cast<int>(parameters_.size());

  // Buckets over the gradients in ready order (reverse parameter order).
  std::vector<int64_t> bytes;
  gradient_bytes_ = 0;
  for (int i = count - 1; i >= 0; --i) {
    CHECK(parameters_[i].tensor.scalar_type() == at::kFloat)
        << parameters_[i].name << ": ddp buckets hold fp32 gradients";
    bytes.push_back(parameters_[i].tensor.numel() * kFp32Bytes);
    gradient_bytes_ += bytes.back();
  }
  const std::vector<std::vector<int>> assignment = AssignBuckets(
      bytes, {options_.first_bucket_cap_bytes, options_.bucket_cap_bytes});
  buckets_ = std::vector<Bucket>(assignment.size());
  bucket_of_.assign(count, -1);
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bucket = buckets_[b];
    for (int ready_index : assignment[b]) {
      const int index = count - 1 - ready_index;
      bucket.parameters.push_back(index);
      bucket.offsets.push_back(bucket.numel);
      bucket.numel += parameters_[index].tensor.numel();
      bucket_of_[index] = static_cast<int>(b);
    }
    bucket.flat = at::empty({bucket.numel}, at::kFloat);
  }
  RETURN_IF_ERROR(ResolveTestFault());

  if (communicating()) {
    RETURN_IF_ERROR(CheckSameParametersOnEveryRank());
    RETURN_IF_ERROR(BroadcastParametersFromRankZero());
  }

  for (int i = 0; i < count; ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(parameters_[i].tensor);
    CHECK(accumulator != nullptr)
        << parameters_[i].name << " is not a leaf that requires grad";
    hook_keys_.push_back(accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              OnGradientReady(i);
              return outputs;
            })));
    accumulators_.push_back(std::move(accumulator));
  }
  ready_.assign(count, false);
  syncing_ = false;
  sync_in_flight_ = false;
  return absl::OkStatus();
}

absl::Status DdpStrategy::ResolveTestFault() {
  const DdpTestFault& fault = options_.testonly_fault;
  fault_bucket_ = -1;
  fault_parameter_ = -1;
  if (fault.kind == DdpTestFault::Kind::kBucketNeverSynced) {
    if (fault.bucket >= static_cast<int>(buckets_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--testonly_ddp_fault=", DdpTestFaultName(fault), ": there are ",
          buckets_.size(), " buckets (0..", buckets_.size() - 1, ")"));
    }
    fault_bucket_ = fault.bucket;
  }
  if (fault.kind == DdpTestFault::Kind::kParameterUnreduced) {
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (parameters_[i].name == fault.parameter) {
        fault_parameter_ = static_cast<int>(i);
      }
    }
    if (fault_parameter_ < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--testonly_ddp_fault=", DdpTestFaultName(fault),
                       ": the model has no parameter of that name"));
    }
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::CheckSameParametersOnEveryRank() {
  int64_t elements = 0;
  for (const NamedParameter& p : parameters_) elements += p.tensor.numel();
  const at::Tensor mine =
      at::tensor({static_cast<int64_t>(parameters_.size()), elements,
                  LayoutHash(parameters_)},
                 at::kLong);
  const int n = communicator_->world_size();
  const at::Tensor all = at::empty({n * 3}, at::kLong);
  RETURN_IF_ERROR(Annotate(communicator_->AllGather(mine, all),
                           "ddp: comparing parameter lists across ranks"));
  const int64_t* v = all.data_ptr<int64_t>();
  for (int r = 1; r < n; ++r) {
    if (v[3 * r] != v[0] || v[3 * r + 1] != v[1] || v[3 * r + 2] != v[2]) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "ddp: rank %d has %d parameters (%d elements, layout hash %016x) "
          "but rank 0 has %d (%d elements, layout hash %016x): every rank "
          "must build the same model (same flags)",
          r, v[3 * r], v[3 * r + 1], static_cast<uint64_t>(v[3 * r + 2]),
          v[0], v[1], static_cast<uint64_t>(v[2])));
    }
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::BroadcastParametersFromRankZero() {
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    for (size_t j = 0; j < bucket.parameters.size(); ++j) {
      const at::Tensor& p = parameters_[bucket.parameters[j]].tensor;
      bucket.flat.narrow(0, bucket.offsets[j], p.numel())
          .view(p.sizes())
          .copy_(p);
    }
    RETURN_IF_ERROR(
        Annotate(communicator_->Broadcast(bucket.flat, /*root=*/0),
                 absl::StrCat("ddp: broadcasting rank 0's parameters (bucket ",
                              b, ")")));
    for (size_t j = 0; j < bucket.parameters.size(); ++j) {
      const at::Tensor& p = parameters_[bucket.parameters[j]].tensor;
      p.copy_(bucket.flat.narrow(0, bucket.offsets[j], p.numel())
                  .view(p.sizes()));
    }
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::BeforeBackward(int micro_batch, int micro_batches) {
  CHECK(!parameters_.empty()) << "Setup first";
  if (micro_batch == 0) {
    bytes_sent_at_step_start_ =
        communicating() ? communicator_->log().Totals().bytes_sent : 0;
    wait_ms_ = 0;
    syncs_ = 0;
  }
  // Under --grad_sync=every the previous micro-batch's averages must be in
  // .grad before this backward accumulates onto them.
  RETURN_IF_ERROR(FinishSync());
  syncing_ = options_.grad_sync == GradSync::kEvery ||
             micro_batch == micro_batches - 1;
  if (syncing_) {
    for (Bucket& bucket : buckets_) {
      bucket.pending = static_cast<int>(bucket.parameters.size());
      bucket.handle = collective::CollectiveHandle();
    }
    std::fill(ready_.begin(), ready_.end(), false);
    next_bucket_ = 0;
    sync_in_flight_ = true;
  }
  return absl::OkStatus();
}

void DdpStrategy::OnGradientReady(int index) {
  if (!syncing_ || ready_[index]) return;
  ready_[index] = true;
  Bucket& bucket = buckets_[bucket_of_[index]];
  if (--bucket.pending == 0) LaunchReadyBuckets();
}

void DdpStrategy::LaunchReadyBuckets() {
  at::NoGradGuard no_grad;
  while (next_bucket_ < buckets_.size() &&
         buckets_[next_bucket_].pending == 0) {
    const int index = static_cast<int>(next_bucket_++);
    Bucket& bucket = buckets_[index];
    if (!communicating()) continue;  // one rank: .grad is the average already
    if (index == fault_bucket_) continue;  // test fault: never synchronised
    for (size_t j = 0; j < bucket.parameters.size(); ++j) {
      const at::Tensor& grad = parameters_[bucket.parameters[j]].tensor.grad();
      bucket.flat.narrow(0, bucket.offsets[j], grad.numel())
          .view(grad.sizes())
          .copy_(grad);
    }
    const bool sum_fault =
        options_.testonly_fault.kind == DdpTestFault::Kind::kSumNotAverage;
    bucket.handle = communicator_->AllReduceAsync(
        bucket.flat,
        sum_fault ? collective::ReduceOp::kSum : collective::ReduceOp::kAvg);
  }
}

absl::Status DdpStrategy::FinishSync() {
  if (!sync_in_flight_) return absl::OkStatus();
  sync_in_flight_ = false;
  syncing_ = false;
  if (next_bucket_ < buckets_.size()) {
    // A bucket never became ready: some parameter got no gradient. Its peers
    // are blocked in this bucket's all-reduce; failing here ends the run.
    for (int index : buckets_[next_bucket_].parameters) {
      if (!ready_[index]) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ddp: parameter ", parameters_[index].name,
            " got no gradient in a synchronised backward (bucket ",
            next_bucket_, "); every parameter must take part in the loss"));
      }
    }
    LOG(FATAL) << "bucket " << next_bucket_ << " not launched but complete";
  }
  ++syncs_;
  if (!communicating()) return absl::OkStatus();
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (static_cast<int>(b) == fault_bucket_) continue;  // test fault
    Bucket& bucket = buckets_[b];
    const Stopwatch watch;
    const absl::Status waited = bucket.handle.Wait();
    wait_ms_ += watch.ElapsedMs();
    RETURN_IF_ERROR(Annotate(
        waited, absl::StrCat("ddp: gradient all-reduce of bucket ", b)));
    for (size_t j = 0; j < bucket.parameters.size(); ++j) {
      if (bucket.parameters[j] == fault_parameter_) continue;  // test fault
      at::Tensor& grad = parameters_[bucket.parameters[j]].tensor.mutable_grad();
      grad.copy_(bucket.flat.narrow(0, bucket.offsets[j], grad.numel())
                     .view(grad.sizes()));
    }
    bucket.handle = collective::CollectiveHandle();
  }
  return absl::OkStatus();
}

absl::Status DdpStrategy::AfterBackward() { return FinishSync(); }

StepCommunication DdpStrategy::TakeStepCommunication() {
  StepCommunication step;
  step.wait_ms = wait_ms_;
  step.syncs = syncs_;
  if (communicating()) {
    step.bytes_sent = communicator_->log().Totals().bytes_sent -
                      bytes_sent_at_step_start_;
  }
  // The layer's byte model of one all-reduce of every gradient; the buckets'
  // records round each bucket down, so they may count up to one byte less
  // per bucket.
  step.expected_bytes =
      syncs_ * collective::AllReduceTraffic(gradient_bytes_, world_size()).sent;
  return step;
}

std::vector<BucketSummary> DdpStrategy::Buckets() const {
  std::vector<BucketSummary> summaries;
  for (const Bucket& bucket : buckets_) {
    BucketSummary summary;
    summary.parameters = static_cast<int>(bucket.parameters.size());
    summary.bytes = bucket.numel * kFp32Bytes;
    summary.first_parameter = parameters_[bucket.parameters.front()].name;
    summary.last_parameter = parameters_[bucket.parameters.back()].name;
    summaries.push_back(std::move(summary));
  }
  return summaries;
}

absl::StatusOr<double> DdpStrategy::GlobalGradNorm() {
  return GradNorm(parameters_);
}

absl::Status DdpStrategy::ScaleGradients(double factor) {
  ScaleGrads(parameters_, factor);
  return absl::OkStatus();
}

absl::StatusOr<double> DdpStrategy::ReduceScalar(double value,
                                                 ScalarReduction op) {
  if (!communicating()) return value;
  const at::Tensor tensor = at::full({1}, value, at::kDouble);
  collective::ReduceOp reduce = collective::ReduceOp::kSum;
  if (op == ScalarReduction::kMean) reduce = collective::ReduceOp::kAvg;
  if (op == ScalarReduction::kMax) reduce = collective::ReduceOp::kMax;
  RETURN_IF_ERROR(Annotate(communicator_->AllReduce(tensor, reduce),
                           "ddp: reducing a scalar"));
  return tensor.item<double>();
}

absl::StatusOr<std::vector<double>> DdpStrategy::GatherScalars(
    const std::vector<double>& values) {
  if (!communicating()) return values;
  const int64_t k = static_cast<int64_t>(values.size());
  const at::Tensor mine = at::empty({k}, at::kDouble);
  std::copy(values.begin(), values.end(), mine.data_ptr<double>());
  const at::Tensor all =
      at::empty({communicator_->world_size() * k}, at::kDouble);
  RETURN_IF_ERROR(Annotate(communicator_->AllGather(mine, all),
                           "ddp: gathering scalars"));
  const double* data = all.data_ptr<double>();
  return std::vector<double>(data, data + all.numel());
}

absl::Status DdpStrategy::OptimizerStep(double lr) {
  optimizer_->Step(lr);
  return absl::OkStatus();
}

}  // namespace mtb
