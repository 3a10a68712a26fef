// The collective layer over c10d's ProcessGroupGloo.
//
// Vocabulary. To *issue* a collective is to hand it to c10d under the issue
// lock, which also fixes its *sequence* number, so numbers follow issue order.
// The *transport tensor* is what Gloo sees (tensor_checks.h). A *pending*
// collective (PendingCollective) is one issued and not yet observed complete;
// its *finish* step runs on the thread that observes completion, after the
// transport is done: copying an emulated result back to bfloat16, the local
// reduction of an all-to-all based reduce-scatter, the division of avg. A
// failure while issuing, waiting or finishing *breaks* the communicator
// (CommState::first_failure); a broken communicator refuses every later call.
#include "common/dist/communicator.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/dist/halving_doubling.h"
#include "common/dist/process_group.h"
#include "common/dist/store_impl.h"
#include "common/dist/tensor_checks.h"
#include "common/dist/traffic.h"
#include "common/dtype.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "glog/logging.h"

namespace mtb::dist {

// kAuto's choice. Measured with //common/dist:reduce_scatter_benchmark
// (docs/dist.md, "Reduce-scatter"): TODO(measurement).
constexpr ReduceScatterAlgorithm kDefaultReduceScatterAlgorithm =
    ReduceScatterAlgorithm::kAllToAll;

namespace {

constexpr absl::string_view kGloo = "gloo";

// State shared by a communicator and its pending collectives (which may
// outlive it).
struct CommState {
  CommState(int rank, int world_size, bool keep_records)
      : rank(rank), world_size(world_size), log(keep_records) {}

  absl::Status Health() const {
    absl::MutexLock lock(&mutex);
    return first_failure;
  }
  void Break(const absl::Status& failure) {
    absl::MutexLock lock(&mutex);
    if (!first_failure.ok()) return;
    first_failure = failure;
    LOG(ERROR) << "communicator broken: " << failure;
  }

  const int rank;
  const int world_size;
  CollectiveLog log;
  mutable absl::Mutex mutex;
  absl::Status first_failure ABSL_GUARDED_BY(mutex);
};

std::string Describe(const CollectiveRecord& record, int rank, int world_size) {
  std::string text = absl::StrCat(CollectiveOpName(record.op), " #",
                                  record.sequence, " (", record.dtype, ", ",
                                  record.elements, " elements");
  if (record.op == CollectiveOp::kSend) {
    absl::StrAppend(&text, ", to rank ", record.peer);
  } else if (record.op == CollectiveOp::kRecv) {
    absl::StrAppend(&text, ", from rank ", record.peer);
  } else if (record.op == CollectiveOp::kBroadcast) {
    absl::StrAppend(&text, ", root ", record.peer);
  }
  absl::StrAppend(&text, ") on rank ", rank, " of ", world_size);
  return text;
}

// `raw` is a CallGuarded(kGloo, ...) status: "gloo: <what Gloo said>".
absl::Status CollectiveFailure(const CollectiveRecord& record, int rank,
                               int world_size, absl::Duration timeout,
                               const absl::Status& raw) {
  absl::string_view detail = raw.message();
  absl::ConsumePrefix(&detail, absl::StrCat(kGloo, ": "));
  const std::string what = Describe(record, rank, world_size);
  const std::string timeout_text = absl::FormatDuration(timeout);
  if (raw.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::Status(raw.code(), absl::StrCat(what, " failed after timeout ",
                                                 timeout_text, ": ", detail));
  }
  return absl::Status(raw.code(), absl::StrCat(what, " failed (timeout ",
                                               timeout_text, "): ", detail));
}

c10d::ReduceOp ToC10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceOp::kMax:
      return c10d::ReduceOp(c10d::ReduceOp::MAX);
    case ReduceOp::kMin:
      return c10d::ReduceOp(c10d::ReduceOp::MIN);
  }
  LOG(FATAL) << "unknown ReduceOp";
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

HalvingDoublingOp ToHalvingDoubling(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return HalvingDoublingOp::kSum;
    case ReduceOp::kMax:
      return HalvingDoublingOp::kMax;
    case ReduceOp::kMin:
      return HalvingDoublingOp::kMin;
  }
  LOG(FATAL) << "unknown ReduceOp";
  return HalvingDoublingOp::kSum;
}

// Combines the n blocks of `blocks` (n, k) into `out` (k elements) in rank
// order 0, 1, ..., n-1, so every rank computes bit-identical results.
void ReduceBlocks(const at::Tensor& blocks, at::Tensor out, ReduceOp op) {
  out.copy_(blocks[0]);
  for (int64_t p = 1; p < blocks.size(0); ++p) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        out.add_(blocks[p]);
        break;
      case ReduceOp::kMax:
        at::maximum_out(out, out, blocks[p]);
        break;
      case ReduceOp::kMin:
        at::minimum_out(out, out, blocks[p]);
        break;
    }
  }
}

absl::Status CheckReduceOp(absl::string_view what, ReduceOp op,
                           const at::Tensor& tensor) {
  if (op == ReduceOp::kAvg && !at::isFloatingType(tensor.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": avg needs a floating dtype, got ",
                     DtypeName(tensor.scalar_type())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

absl::string_view ReduceScatterAlgorithmName(ReduceScatterAlgorithm algorithm) {
  switch (algorithm) {
    case ReduceScatterAlgorithm::kAuto:
      return "auto";
    case ReduceScatterAlgorithm::kAllToAll:
      return "alltoall";
    case ReduceScatterAlgorithm::kHalvingDoubling:
      return "halving_doubling";
  }
  return "unknown";
}

absl::StatusOr<ReduceScatterAlgorithm> ParseReduceScatterAlgorithm(
    absl::string_view name) {
  for (ReduceScatterAlgorithm algorithm :
       {ReduceScatterAlgorithm::kAuto, ReduceScatterAlgorithm::kAllToAll,
        ReduceScatterAlgorithm::kHalvingDoubling}) {
    if (ReduceScatterAlgorithmName(algorithm) == name) return algorithm;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown reduce-scatter algorithm '", name,
      "'; expected auto, alltoall or halving_doubling"));
}

// ---------------------------------------------------------------------------
// PendingCollective and CollectiveHandle.

class PendingCollective {
 public:
  // Refused before issue: never logged, no sequence number.
  explicit PendingCollective(absl::Status refusal)
      : done_(true), status_(std::move(refusal)) {}

  PendingCollective(std::shared_ptr<CommState> state, CollectiveRecord record,
                    absl::Duration timeout)
      : state_(std::move(state)), record_(std::move(record)), timeout_(timeout) {}

  // Waits for what is still running: a dropped handle still completes its
  // record and, on failure, breaks the communicator.
  ~PendingCollective() { (void)Wait(); }

  void Launched(c10::intrusive_ptr<c10d::Work> work,
                std::function<void()> finish) {
    absl::MutexLock lock(&mutex_);
    work_ = std::move(work);
    finish_ = std::move(finish);
  }

  // For a collective that ran on the issuing thread (blocked for
  // `wait_time`) or failed to issue: `raw` is its CallGuarded(kGloo, ...)
  // status.
  void CompleteNow(const absl::Status& raw, absl::Duration wait_time) {
    absl::MutexLock lock(&mutex_);
    Complete(raw, wait_time);
  }

  absl::Status Wait() {
    absl::MutexLock lock(&mutex_);
    if (done_) return status_;
    const absl::Time wait_start = absl::Now();
    absl::Status raw = CallGuarded(kGloo, [&] {
      if (work_) work_->wait();
      if (finish_) finish_();
    });
    Complete(raw, absl::Now() - wait_start);
    return status_;
  }

  bool IsCompleted() {
    {
      absl::MutexLock lock(&mutex_);
      if (done_) return true;
      if (work_ && !work_->isCompleted()) return false;
    }
    (void)Wait();  // does not block: the transport is done
    return true;
  }

  int64_t sequence() const { return record_.sequence; }

 private:
  void Complete(const absl::Status& raw, absl::Duration wait_time)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    status_ = raw.ok() ? raw
                       : CollectiveFailure(record_, state_->rank,
                                           state_->world_size, timeout_, raw);
    done_ = true;
    work_.reset();
    finish_ = nullptr;
    record_.completed = true;
    record_.duration = absl::Now() - record_.issue_time;
    record_.wait_time = wait_time;
    record_.status = status_;
    if (!status_.ok()) state_->Break(status_);
    state_->log.Complete(record_);
  }

  const std::shared_ptr<CommState> state_;
  CollectiveRecord record_;
  const absl::Duration timeout_ = absl::ZeroDuration();
  absl::Mutex mutex_;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mutex_);
  c10::intrusive_ptr<c10d::Work> work_ ABSL_GUARDED_BY(mutex_);
  std::function<void()> finish_ ABSL_GUARDED_BY(mutex_);
};

absl::Status CollectiveHandle::Wait() {
  if (!pending_) {
    return absl::FailedPreconditionError(
        "Wait() on an empty CollectiveHandle (default-constructed)");
  }
  return pending_->Wait();
}

bool CollectiveHandle::IsCompleted() {
  return pending_ == nullptr || pending_->IsCompleted();
}

int64_t CollectiveHandle::sequence() const {
  return pending_ ? pending_->sequence() : -1;
}

// ---------------------------------------------------------------------------
// Communicator::Impl: argument checks, records and the c10d calls. Every
// public collective takes issue_mutex_ for its whole issue.

class Communicator::Impl {
 public:
  Impl(std::shared_ptr<CommState> state, Store store, GlooDevices devices,
       c10::intrusive_ptr<GlooProcessGroup> group,
       const CommunicatorOptions& options)
      : state_(std::move(state)),
        store_(std::move(store)),
        devices_(std::move(devices)),
        group_(std::move(group)),
        timeout_(options.timeout),
        reduce_scatter_algorithm_(options.reduce_scatter_algorithm) {}

  int rank() const { return state_->rank; }
  int world_size() const { return state_->world_size; }
  CommState& state() { return *state_; }
  const std::string& device_description() const {
    return devices_.description;
  }

  absl::Duration timeout() const {
    absl::MutexLock lock(&issue_mutex_);
    return timeout_;
  }

  absl::Status SetTimeout(absl::Duration timeout) {
    absl::MutexLock lock(&issue_mutex_);
    RETURN_IF_ERROR(state_->Health());
    if (timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SetTimeout: timeout must be positive, got ",
                       absl::FormatDuration(timeout)));
    }
    if (const int64_t in_flight = state_->log.InFlight(); in_flight > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "SetTimeout on rank ", rank(), ": ", in_flight,
          " collective(s) still in flight; Wait() for them first"));
    }
    group_->SetTimeout(ToChronoMs(timeout));
    timeout_ = timeout;
    if (halving_doubling_context_) {
      // Its pairs keep the timeout they were built with: rebuild at next use.
      halving_doubling_context_.reset();
      ++halving_doubling_generation_;
    }
    return absl::OkStatus();
  }

  void SetReduceScatterAlgorithm(ReduceScatterAlgorithm algorithm) {
    absl::MutexLock lock(&issue_mutex_);
    reduce_scatter_algorithm_ = algorithm;
  }
  ReduceScatterAlgorithm reduce_scatter_algorithm() const {
    absl::MutexLock lock(&issue_mutex_);
    return reduce_scatter_algorithm_;
  }

  CollectiveHandle AllReduce(const at::Tensor& tensor, ReduceOp op) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kAllReduce;
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckTensor(what, "tensor", tensor, TensorUse::kReduce));
      return CheckReduceOp(what, op, tensor);
    }();
    if (!valid.ok()) return Refuse(valid);
    const TransportTensor transport = ForReduction(tensor);
    CollectiveRecord record = NewRecord(kind, tensor, transport.tensor, tensor);
    SetReduction(record, op, transport);
    SetTraffic(record, AllReduceTraffic(transport.tensor.nbytes(), world_size()));
    record.algorithm = "gloo_allreduce";
    return Launch(std::move(record), [&] {
      std::vector<at::Tensor> tensors{transport.tensor};
      c10d::AllreduceOptions options;
      options.reduceOp = ToC10d(op);
      return Launched{group_->allreduce(tensors, options),
                      FinishReduction(transport, tensor, op)};
    });
  }

  CollectiveHandle Broadcast(const at::Tensor& tensor, int root) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kBroadcast;
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckRank(what, "root", root));
      return CheckTensor(what, "tensor", tensor, TensorUse::kCopy);
    }();
    if (!valid.ok()) return Refuse(valid);
    const at::Tensor bits = BitsView(tensor);
    CollectiveRecord record = NewRecord(kind, tensor, bits, tensor);
    record.peer = root;
    SetTraffic(record,
               BroadcastTraffic(tensor.nbytes(), world_size(), rank(), root));
    record.algorithm = "gloo_broadcast";
    return Launch(std::move(record), [&] {
      std::vector<at::Tensor> tensors{bits};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      return Launched{group_->broadcast(tensors, options), nullptr};
    });
  }

  CollectiveHandle AllGather(const at::Tensor& input, const at::Tensor& output) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kAllGather;
    const std::string what = What(kind);
    const int64_t k = input.defined() ? input.numel() : 0;
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckTensor(what, "input", input, TensorUse::kCopy));
      RETURN_IF_ERROR(CheckTensor(what, "output", output, TensorUse::kCopy));
      RETURN_IF_ERROR(CheckSameDtype(what, "output", output, "input", input));
      if (output.numel() != world_size() * k) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": output has ", output.numel(),
            " elements, expected world_size ", world_size(), " * input ", k,
            " = ", world_size() * k));
      }
      return CheckNoOverlapExceptSlot(what, input, output, rank() * k);
    }();
    if (!valid.ok()) return Refuse(valid);
    const at::Tensor flat_output = BitsView(output).view({-1});
    std::vector<at::Tensor> blocks;
    for (int p = 0; p < world_size(); ++p) {
      blocks.push_back(flat_output.narrow(0, p * k, k));
    }
    return IssueAllGatherList(kind, input, std::move(blocks),
                              "gloo_allgather_list");
  }

  CollectiveHandle AllGatherList(const at::Tensor& input,
                                 const std::vector<at::Tensor>& outputs) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kAllGather;
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckTensor(what, "input", input, TensorUse::kCopy));
      if (static_cast<int>(outputs.size()) != world_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": outputs has ", outputs.size(),
                         " tensors, expected one per rank: world_size ",
                         world_size()));
      }
      for (int p = 0; p < world_size(); ++p) {
        const std::string name = absl::StrCat("outputs[", p, "]");
        RETURN_IF_ERROR(CheckTensor(what, name, outputs[p], TensorUse::kCopy));
        RETURN_IF_ERROR(CheckSameDtype(what, name, outputs[p], "input", input));
        if (outputs[p].sizes() != input.sizes()) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, ": ", name, " has shape ",
                           ShapeText(outputs[p]), ", expected input's ",
                           ShapeText(input)));
        }
      }
      return absl::OkStatus();
    }();
    if (!valid.ok()) return Refuse(valid);
    std::vector<at::Tensor> blocks;
    for (const at::Tensor& output : outputs) blocks.push_back(BitsView(output));
    return IssueAllGatherList(kind, input, std::move(blocks),
                              "gloo_allgather_list");
  }

  CollectiveHandle AllGatherV(const at::Tensor& input, const at::Tensor& output,
                              absl::Span<const int64_t> counts) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kAllGatherV;
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckCounts(what, "counts", counts, world_size()));
      RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kCopy));
      if (input.size(0) != counts[rank()]) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": input has ", input.size(0), " rows, expected counts[",
            rank(), "] = ", counts[rank()]));
      }
      if (output.size(0) != Sum(counts)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": output has ", output.size(0),
                         " rows, expected sum(counts) = ", Sum(counts)));
      }
      return CheckNoOverlapExceptSlot(
          what, input, output, Sum(counts.subspan(0, rank())) * RowNumel(input));
    }();
    if (!valid.ok()) return Refuse(valid);
    const at::Tensor bits_output = BitsView(output);
    CollectiveRecord record = NewRecord(kind, input, bits_output, output);
    SetTraffic(record,
               AllGatherVTraffic(ToVector(counts),
                                 RowNumel(input) * input.element_size(), rank()));
    record.algorithm = "gloo_alltoall_base(replicated input)";
    // Every rank sends its whole input to every rank: n copies of it along
    // dim 0, one split each (c10d's allgather wants equal sizes).
    std::vector<int64_t> send_counts(world_size(), input.size(0));
    std::vector<int64_t> recv_counts = ToVector(counts);
    std::vector<int64_t> repeats(input.dim(), 1);
    repeats[0] = world_size();
    return Launch(std::move(record), [&] {
      at::Tensor replicated = BitsView(input).repeat(repeats);
      at::Tensor recv = bits_output;
      return Launched{group_->alltoall_base(recv, replicated, recv_counts,
                                            send_counts),
                      nullptr};
    });
  }

  CollectiveHandle ReduceScatter(const at::Tensor& input,
                                 const at::Tensor& output, ReduceOp op) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kReduceScatter;
    const std::string what = What(kind);
    const int64_t k = output.defined() ? output.numel() : 0;
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckTensor(what, "input", input, TensorUse::kReduce));
      RETURN_IF_ERROR(CheckTensor(what, "output", output, TensorUse::kReduce));
      RETURN_IF_ERROR(CheckSameDtype(what, "output", output, "input", input));
      RETURN_IF_ERROR(CheckReduceOp(what, op, input));
      if (input.numel() != world_size() * k) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": input has ", input.numel(),
            " elements, expected world_size ", world_size(), " * output ", k,
            " = ", world_size() * k));
      }
      return absl::OkStatus();
    }();
    if (!valid.ok()) return Refuse(valid);
    CollectiveRecord record = NewRecord(kind, input, input, input);
    return IssueReduceScatter(std::move(record), input, output,
                              std::vector<int64_t>(world_size(), k), op);
  }

  CollectiveHandle ReduceScatterV(const at::Tensor& input,
                                  const at::Tensor& output,
                                  absl::Span<const int64_t> counts,
                                  ReduceOp op) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kReduceScatterV;
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckCounts(what, "counts", counts, world_size()));
      RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kReduce));
      RETURN_IF_ERROR(CheckReduceOp(what, op, input));
      if (input.size(0) != Sum(counts)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": input has ", input.size(0),
                         " rows, expected sum(counts) = ", Sum(counts)));
      }
      if (output.size(0) != counts[rank()]) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": output has ", output.size(0), " rows, expected counts[",
            rank(), "] = ", counts[rank()]));
      }
      return absl::OkStatus();
    }();
    if (!valid.ok()) return Refuse(valid);
    CollectiveRecord record = NewRecord(kind, input, input, input);
    std::vector<int64_t> block_elements;
    for (int64_t count : counts) {
      block_elements.push_back(count * RowNumel(input));
    }
    return IssueReduceScatter(std::move(record), input, output,
                              std::move(block_elements), op);
  }

  CollectiveHandle AllToAll(const at::Tensor& input, const at::Tensor& output) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kAllToAll;
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kCopy));
      if (output.sizes() != input.sizes()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": output has shape ", ShapeText(output),
                         ", expected input's ", ShapeText(input)));
      }
      if (input.size(0) % world_size() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": input has ", input.size(0),
            " rows along dim 0, not divisible by world_size ", world_size(),
            "; use AllToAllV for uneven splits"));
      }
      return CheckNoOverlap(what, input, output);
    }();
    if (!valid.ok()) return Refuse(valid);
    const at::Tensor bits_input = BitsView(input);
    const at::Tensor bits_output = BitsView(output);
    CollectiveRecord record = NewRecord(kind, input, bits_input, input);
    SetTraffic(record, AllToAllTraffic(input.nbytes(), world_size()));
    record.algorithm = "gloo_alltoall_base";
    return Launch(std::move(record), [&] {
      at::Tensor send = bits_input;
      at::Tensor recv = bits_output;
      std::vector<int64_t> equal;  // empty: equal splits
      return Launched{group_->alltoall_base(recv, send, equal, equal), nullptr};
    });
  }

  CollectiveHandle AllToAllV(const at::Tensor& input, const at::Tensor& output,
                             absl::Span<const int64_t> send_counts,
                             absl::Span<const int64_t> recv_counts) {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kAllToAllV;
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckCounts(what, "send_counts", send_counts, world_size()));
      RETURN_IF_ERROR(CheckCounts(what, "recv_counts", recv_counts, world_size()));
      RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kCopy));
      if (input.size(0) != Sum(send_counts)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": input has ", input.size(0),
                         " rows, expected sum(send_counts) = ", Sum(send_counts)));
      }
      if (output.size(0) != Sum(recv_counts)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": output has ", output.size(0),
                         " rows, expected sum(recv_counts) = ", Sum(recv_counts)));
      }
      return CheckNoOverlap(what, input, output);
    }();
    if (!valid.ok()) return Refuse(valid);
    const at::Tensor bits_input = BitsView(input);
    const at::Tensor bits_output = BitsView(output);
    CollectiveRecord record = NewRecord(kind, input, bits_input, input);
    SetTraffic(record, AllToAllVTraffic(ToVector(send_counts),
                                        ToVector(recv_counts),
                                        RowNumel(input) * input.element_size(),
                                        rank()));
    record.algorithm = "gloo_alltoall_base";
    std::vector<int64_t> send = ToVector(send_counts);
    std::vector<int64_t> recv = ToVector(recv_counts);
    return Launch(std::move(record), [&] {
      at::Tensor in = bits_input;
      at::Tensor out = bits_output;
      return Launched{group_->alltoall_base(out, in, recv, send), nullptr};
    });
  }

  CollectiveHandle Barrier() {
    absl::MutexLock lock(&issue_mutex_);
    const CollectiveOp kind = CollectiveOp::kBarrier;
    if (absl::Status usable = Usable(kind); !usable.ok()) return Refuse(usable);
    CollectiveRecord record;
    record.op = kind;
    record.algorithm = "gloo_barrier";
    return Launch(std::move(record), [&] {
      return Launched{group_->barrier(), nullptr};
    });
  }

  CollectiveHandle PointToPoint(CollectiveOp kind, const at::Tensor& tensor,
                                int peer, int tag) {
    absl::MutexLock lock(&issue_mutex_);
    const std::string what = What(kind);
    absl::Status valid = [&]() -> absl::Status {
      RETURN_IF_ERROR(Usable(kind));
      RETURN_IF_ERROR(CheckRank(what, "peer", peer));
      if (peer == rank()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": peer ", peer, " is this rank"));
      }
      if (tag < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": tag ", tag, " is negative"));
      }
      return CheckTensor(what, "tensor", tensor, TensorUse::kCopy);
    }();
    if (!valid.ok()) return Refuse(valid);
    const at::Tensor bits = BitsView(tensor);
    CollectiveRecord record = NewRecord(kind, tensor, bits, tensor);
    record.peer = peer;
    const bool send = kind == CollectiveOp::kSend;
    SetTraffic(record, send ? SendTraffic(tensor.nbytes())
                            : RecvTraffic(tensor.nbytes()));
    record.algorithm = send ? "gloo_send" : "gloo_recv";
    return Launch(std::move(record), [&] {
      std::vector<at::Tensor> tensors{bits};
      return Launched{send ? group_->send(tensors, peer, tag)
                           : group_->recv(tensors, peer, tag),
                      nullptr};
    });
  }

 private:
  struct Launched {
    c10::intrusive_ptr<c10d::Work> work;
    std::function<void()> finish;  // may be empty
  };

  std::string What(CollectiveOp kind) const {
    return absl::StrCat(CollectiveOpName(kind), " on rank ", rank(), " of ",
                        world_size());
  }

  absl::Status Usable(CollectiveOp kind) const {
    absl::Status health = state_->Health();
    if (health.ok()) return health;
    return absl::FailedPreconditionError(absl::StrCat(
        What(kind), ": refused, the communicator is unusable after an earlier "
                    "failure: ",
        health.message()));
  }

  // A call that did not issue: this rank skipped a collective its peers may
  // be in, so the communicator breaks (a no-op when already broken).
  CollectiveHandle Refuse(const absl::Status& problem) {
    state_->Break(problem);
    return CollectiveHandle(std::make_shared<PendingCollective>(problem));
  }

  absl::Status CheckRank(absl::string_view what, absl::string_view name,
                         int value) const {
    if (value >= 0 && value < world_size()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", name, " ", value, " is not a rank in [0, ",
                     world_size(), ")"));
  }

  static absl::Status CheckRowTensors(absl::string_view what,
                                      const at::Tensor& input,
                                      const at::Tensor& output, TensorUse use) {
    RETURN_IF_ERROR(CheckTensor(what, "input", input, use));
    RETURN_IF_ERROR(CheckTensor(what, "output", output, use));
    RETURN_IF_ERROR(CheckSameDtype(what, "output", output, "input", input));
    RETURN_IF_ERROR(CheckHasRows(what, "input", input));
    RETURN_IF_ERROR(CheckHasRows(what, "output", output));
    return CheckSameRowShape(what, "output", output, "input", input);
  }

  static std::vector<int64_t> ToVector(absl::Span<const int64_t> counts) {
    return std::vector<int64_t>(counts.begin(), counts.end());
  }

  // `s_tensor` is the tensor whose size is S (traffic.h).
  static CollectiveRecord NewRecord(CollectiveOp kind, const at::Tensor& caller,
                                    const at::Tensor& transport,
                                    const at::Tensor& s_tensor) {
    CollectiveRecord record;
    record.op = kind;
    record.dtype = std::string(DtypeName(caller.scalar_type()));
    record.transport_dtype = std::string(DtypeName(transport.scalar_type()));
    record.elements = s_tensor.numel();
    record.size_bytes = s_tensor.nbytes();
    return record;
  }

  static void SetTraffic(CollectiveRecord& record, Traffic traffic) {
    record.bytes_sent = traffic.sent;
    record.bytes_received = traffic.received;
  }

  static void SetReduction(CollectiveRecord& record, ReduceOp op,
                           const TransportTensor& transport) {
    record.reduce_op = std::string(ReduceOpName(op));
    record.emulated = transport.emulated;
    record.transport_dtype =
        std::string(DtypeName(transport.tensor.scalar_type()));
  }

  // After a reduction into `transport`: avg's division, then the copy back to
  // the caller's bfloat16 tensor when emulated.
  std::function<void()> FinishReduction(const TransportTensor& transport,
                                        const at::Tensor& caller,
                                        ReduceOp op) const {
    if (op != ReduceOp::kAvg && !transport.emulated) return nullptr;
    const int64_t n = world_size();
    return [transport, caller, op, n] {
      if (op == ReduceOp::kAvg) transport.tensor.div_(n);
      if (transport.emulated) caller.copy_(transport.tensor);
    };
  }

  // blocks: n tensors of input.numel() elements that receive rank p's input.
  CollectiveHandle IssueAllGatherList(CollectiveOp kind, const at::Tensor& input,
                                      std::vector<at::Tensor> blocks,
                                      absl::string_view algorithm)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_) {
    const at::Tensor bits_input = BitsView(input);
    CollectiveRecord record = NewRecord(kind, input, bits_input, input);
    record.elements = input.numel() * world_size();
    record.size_bytes = input.nbytes() * world_size();
    SetTraffic(record, AllGatherTraffic(record.size_bytes, world_size()));
    record.algorithm = std::string(algorithm);
    return Launch(std::move(record), [&] {
      std::vector<at::Tensor> inputs{bits_input.view(blocks[0].sizes())};
      std::vector<std::vector<at::Tensor>> outputs{blocks};
      return Launched{group_->allgather(outputs, inputs), nullptr};
    });
  }

  // `block_elements[p]`: flat elements of input reduced onto rank p.
  CollectiveHandle IssueReduceScatter(CollectiveRecord record,
                                      const at::Tensor& input,
                                      const at::Tensor& output,
                                      std::vector<int64_t> block_elements,
                                      ReduceOp op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_) {
    const int n = world_size();
    const int64_t mine = block_elements[rank()];
    const TransportTensor transport = ForReduction(input);
    const at::Tensor flat_input = transport.tensor.view({-1});
    // Where the reduction lands before avg and the copy back.
    const TransportTensor result{
        transport.emulated ? at::empty({mine}, flat_input.options())
                           : output.view({-1}),
        transport.emulated};
    SetReduction(record, op, transport);
    const int64_t element_size = flat_input.element_size();
    if (record.op == CollectiveOp::kReduceScatter) {
      SetTraffic(record, ReduceScatterTraffic(flat_input.nbytes(), n));
    } else {
      std::vector<int64_t> counts = block_elements;
      SetTraffic(record, ReduceScatterVTraffic(counts, element_size, rank()));
    }
    const std::function<void()> finish_result =
        FinishReduction(result, output.view({-1}), op);

    ReduceScatterAlgorithm algorithm = reduce_scatter_algorithm_;
    if (algorithm == ReduceScatterAlgorithm::kAuto) {
      algorithm = kDefaultReduceScatterAlgorithm;
    }
    // Why Gloo's algorithm cannot take this call, or "" when it can.
    std::string unfit;
    if (!HalvingDoublingSupports(flat_input.scalar_type())) {
      unfit = absl::StrCat("does not take ",
                           DtypeName(flat_input.scalar_type()));
    } else if (flat_input.numel() > INT_MAX) {
      unfit = "takes at most 2^31-1 elements";
    } else if (std::find(block_elements.begin(), block_elements.end(), 0) !=
               block_elements.end()) {
      // Gloo 0.5's distribution phase hangs on some empty blocks (n=3,
      // counts {2, 0, 3}); see docs/dist.md.
      unfit = "skipped for empty blocks";
    }
    if (algorithm == ReduceScatterAlgorithm::kHalvingDoubling && unfit.empty()) {
      record.algorithm = "gloo_reduce_scatter_halving_doubling";
      std::vector<int> recv_elements(block_elements.begin(),
                                     block_elements.end());
      return RunNow(std::move(record), [&] {
        const std::shared_ptr<::gloo::Context> context =
            HalvingDoublingContext();
        // The algorithm works in place; the emulated input is already ours.
        at::Tensor buffer =
            transport.emulated ? flat_input : flat_input.clone();
        HalvingDoublingReduceScatter(context, buffer, recv_elements,
                                     ToHalvingDoubling(op));
        result.tensor.copy_(buffer.narrow(0, 0, mine));
        if (finish_result) finish_result();
      });
    }
    record.algorithm = "gloo_alltoall_base+local_reduce";
    if (algorithm == ReduceScatterAlgorithm::kHalvingDoubling) {
      absl::StrAppend(&record.algorithm, " (halving_doubling ", unfit, ")");
    }
    std::vector<int64_t> send_counts = block_elements;
    std::vector<int64_t> recv_counts(n, mine);
    return Launch(std::move(record), [&] {
      // blocks: (n, mine); row p is rank p's contribution to this rank.
      at::Tensor blocks = at::empty({n * mine}, flat_input.options());
      at::Tensor in = flat_input;
      c10::intrusive_ptr<c10d::Work> work =
          group_->alltoall_base(blocks, in, recv_counts, send_counts);
      const at::Tensor reduced = result.tensor;
      return Launched{work, [blocks, reduced, n, mine, op, finish_result] {
                        ReduceBlocks(blocks.view({n, mine}), reduced, op);
                        if (finish_result) finish_result();
                      }};
    });
  }

  std::shared_ptr<::gloo::Context> HalvingDoublingContext()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_) {
    if (!halving_doubling_context_) {
      const Store store = store_.WithPrefix(
          absl::StrCat("halving_doubling_", halving_doubling_generation_));
      absl::StatusOr<std::shared_ptr<::gloo::rendezvous::Context>> context =
          CreateGlooContext(store.impl()->store, rank(), world_size(), timeout_,
                            devices_);
      if (!context.ok()) throw std::runtime_error(std::string(context.status().message()));
      halving_doubling_context_ = *std::move(context);
    }
    return halving_doubling_context_;
  }

  // Issues `record` and runs `launch` (which calls c10d and returns the work)
  // under CallGuarded.
  template <typename LaunchFn>
  CollectiveHandle Launch(CollectiveRecord record, LaunchFn&& launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_) {
    record = state_->log.Issue(std::move(record));
    auto pending = std::make_shared<PendingCollective>(state_, record, timeout_);
    absl::StatusOr<Launched> launched =
        CallGuarded(kGloo, std::forward<LaunchFn>(launch));
    if (!launched.ok()) {
      pending->CompleteNow(launched.status(), absl::ZeroDuration());
    } else {
      pending->Launched(std::move(launched->work), std::move(launched->finish));
    }
    return CollectiveHandle(std::move(pending));
  }

  // Issues `record` and runs it to completion on this thread.
  template <typename RunFn>
  CollectiveHandle RunNow(CollectiveRecord record, RunFn&& run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_) {
    record = state_->log.Issue(std::move(record));
    auto pending = std::make_shared<PendingCollective>(state_, record, timeout_);
    const absl::Time start = absl::Now();
    const absl::Status status = CallGuarded(kGloo, std::forward<RunFn>(run));
    pending->CompleteNow(status, absl::Now() - start);
    return CollectiveHandle(std::move(pending));
  }

  const std::shared_ptr<CommState> state_;
  const Store store_;
  const GlooDevices devices_;
  const c10::intrusive_ptr<GlooProcessGroup> group_;
  mutable absl::Mutex issue_mutex_;
  absl::Duration timeout_ ABSL_GUARDED_BY(issue_mutex_);
  ReduceScatterAlgorithm reduce_scatter_algorithm_ ABSL_GUARDED_BY(issue_mutex_);
  std::shared_ptr<::gloo::rendezvous::Context> halving_doubling_context_
      ABSL_GUARDED_BY(issue_mutex_);
  int halving_doubling_generation_ ABSL_GUARDED_BY(issue_mutex_) = 0;
};

// ---------------------------------------------------------------------------
// Communicator.

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const Store& store, const CommunicatorOptions& options) {
  if (options.world_size < 1 || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator: rank ", options.rank,
                     " is not in [0, world_size ", options.world_size, ")"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Communicator: timeout must be positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  ASSIGN_OR_RETURN(GlooDevices devices,
                   MakeGlooDevices(GlooDeviceSpec{options.gloo_interface,
                                                  options.gloo_hostname}));
  ASSIGN_OR_RETURN(
      c10::intrusive_ptr<GlooProcessGroup> group,
      CreateGlooProcessGroup(store.impl()->store, options.rank,
                             options.world_size, options.timeout, devices));
  auto state = std::make_shared<CommState>(options.rank, options.world_size,
                                           options.keep_records);
  return std::unique_ptr<Communicator>(new Communicator(std::make_unique<Impl>(
      std::move(state), store, std::move(devices), std::move(group), options)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->rank(); }
int Communicator::world_size() const { return impl_->world_size(); }
absl::Duration Communicator::timeout() const { return impl_->timeout(); }
const std::string& Communicator::device_description() const {
  return impl_->device_description();
}
absl::Status Communicator::health() const { return impl_->state().Health(); }
absl::Status Communicator::SetTimeout(absl::Duration timeout) {
  return impl_->SetTimeout(timeout);
}
void Communicator::SetReduceScatterAlgorithm(ReduceScatterAlgorithm algorithm) {
  impl_->SetReduceScatterAlgorithm(algorithm);
}
ReduceScatterAlgorithm Communicator::reduce_scatter_algorithm() const {
  return impl_->reduce_scatter_algorithm();
}
CollectiveLog& Communicator::log() { return impl_->state().log; }
const CollectiveLog& Communicator::log() const { return impl_->state().log; }

absl::Status Communicator::AllReduce(const at::Tensor& tensor, ReduceOp op) {
  return AllReduceAsync(tensor, op).Wait();
}
CollectiveHandle Communicator::AllReduceAsync(const at::Tensor& tensor,
                                              ReduceOp op) {
  return impl_->AllReduce(tensor, op);
}
absl::Status Communicator::Broadcast(const at::Tensor& tensor, int root) {
  return BroadcastAsync(tensor, root).Wait();
}
CollectiveHandle Communicator::BroadcastAsync(const at::Tensor& tensor,
                                              int root) {
  return impl_->Broadcast(tensor, root);
}
absl::Status Communicator::AllGather(const at::Tensor& input,
                                     const at::Tensor& output) {
  return AllGatherAsync(input, output).Wait();
}
CollectiveHandle Communicator::AllGatherAsync(const at::Tensor& input,
                                              const at::Tensor& output) {
  return impl_->AllGather(input, output);
}
absl::Status Communicator::AllGatherList(const at::Tensor& input,
                                         const std::vector<at::Tensor>& outputs) {
  return AllGatherListAsync(input, outputs).Wait();
}
CollectiveHandle Communicator::AllGatherListAsync(
    const at::Tensor& input, const std::vector<at::Tensor>& outputs) {
  return impl_->AllGatherList(input, outputs);
}
absl::Status Communicator::AllGatherV(const at::Tensor& input,
                                      const at::Tensor& output,
                                      absl::Span<const int64_t> counts) {
  return AllGatherVAsync(input, output, counts).Wait();
}
CollectiveHandle Communicator::AllGatherVAsync(const at::Tensor& input,
                                               const at::Tensor& output,
                                               absl::Span<const int64_t> counts) {
  return impl_->AllGatherV(input, output, counts);
}
absl::Status Communicator::ReduceScatter(const at::Tensor& input,
                                         const at::Tensor& output, ReduceOp op) {
  return ReduceScatterAsync(input, output, op).Wait();
}
CollectiveHandle Communicator::ReduceScatterAsync(const at::Tensor& input,
                                                  const at::Tensor& output,
                                                  ReduceOp op) {
  return impl_->ReduceScatter(input, output, op);
}
absl::Status Communicator::ReduceScatterV(const at::Tensor& input,
                                          const at::Tensor& output,
                                          absl::Span<const int64_t> counts,
                                          ReduceOp op) {
  return ReduceScatterVAsync(input, output, counts, op).Wait();
}
CollectiveHandle Communicator::ReduceScatterVAsync(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> counts, ReduceOp op) {
  return impl_->ReduceScatterV(input, output, counts, op);
}
absl::Status Communicator::AllToAll(const at::Tensor& input,
                                    const at::Tensor& output) {
  return AllToAllAsync(input, output).Wait();
}
CollectiveHandle Communicator::AllToAllAsync(const at::Tensor& input,
                                             const at::Tensor& output) {
  return impl_->AllToAll(input, output);
}
absl::Status Communicator::AllToAllV(const at::Tensor& input,
                                     const at::Tensor& output,
                                     absl::Span<const int64_t> send_counts,
                                     absl::Span<const int64_t> recv_counts) {
  return AllToAllVAsync(input, output, send_counts, recv_counts).Wait();
}
CollectiveHandle Communicator::AllToAllVAsync(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> send_counts,
    absl::Span<const int64_t> recv_counts) {
  return impl_->AllToAllV(input, output, send_counts, recv_counts);
}
absl::Status Communicator::Barrier() { return BarrierAsync().Wait(); }
CollectiveHandle Communicator::BarrierAsync() { return impl_->Barrier(); }
absl::Status Communicator::Send(const at::Tensor& tensor, int peer, int tag) {
  return SendAsync(tensor, peer, tag).Wait();
}
CollectiveHandle Communicator::SendAsync(const at::Tensor& tensor, int peer,
                                         int tag) {
  return impl_->PointToPoint(CollectiveOp::kSend, tensor, peer, tag);
}
absl::Status Communicator::Recv(const at::Tensor& tensor, int peer, int tag) {
  return RecvAsync(tensor, peer, tag).Wait();
}
CollectiveHandle Communicator::RecvAsync(const at::Tensor& tensor, int peer,
                                         int tag) {
  return impl_->PointToPoint(CollectiveOp::kRecv, tensor, peer, tag);
}

}  // namespace mtb::dist
