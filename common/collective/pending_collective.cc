// PendingCollective, CollectiveHandle and failure messages
// (communicator_internal.h has the vocabulary).
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/collective/communicator_internal.h"
#include "common/libtorch/torch_status.h"
#include "glog/logging.h"

namespace mtb::collective {
namespace {

std::string Describe(const CollectiveRecord& record, int rank, int world_size) {
  std::string text =
      absl::StrCat(CollectiveOpName(record.op), " #", record.sequence, " (",
                   record.dtype, ", ", record.elements, " elements");
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

}  // namespace

void TemporaryRegistry::Track(const at::Tensor& tensor) {
  absl::MutexLock lock(&mutex_);
  storages_.erase(
      std::remove_if(storages_.begin(), storages_.end(),
                     [](const auto& storage) { return storage.expired(); }),
      storages_.end());
  storages_.push_back(tensor.storage().getWeakStorageImpl());
}

int64_t TemporaryRegistry::LiveBytes() {
  absl::MutexLock lock(&mutex_);
  int64_t bytes = 0;
  for (const auto& weak : storages_) {
    const c10::intrusive_ptr<c10::StorageImpl> storage = weak.lock();
    if (storage) bytes += static_cast<int64_t>(storage->nbytes());
  }
  return bytes;
}

absl::Status CommState::Health() const {
  absl::MutexLock lock(&mutex);
  return first_failure;
}

void CommState::Break(const absl::Status& failure) {
  {
    absl::MutexLock lock(&mutex);
    if (!first_failure.ok()) return;
    first_failure = failure;
  }
  LOG(ERROR) << "communicator broken: " << failure;
  recorder->SetFailure(failure);
  // The state of every rank at its first failure is what forensics compares
  // (the collective a timeout names, the ones still in flight).
  if (const std::string path = recorder->dump_path(); !path.empty()) {
    const absl::Status dumped = recorder->Dump(
        absl::StrCat("communicator broken: ", failure.message()));
    if (dumped.ok()) {
      LOG(ERROR) << "flight recorder dumped to " << path;
    } else {
      LOG(ERROR) << "flight recorder dump failed: " << dumped;
    }
  }
}

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

void CommState::Abandon(const absl::Status& why) {
  Break(why);
  abandoned_flag.store(true);
}

PendingCollective::PendingCollective(absl::Status refusal)
    : done_(true), status_(std::move(refusal)) {}

PendingCollective::PendingCollective(std::shared_ptr<CommState> state,
                                     CollectiveRecord record,
                                     absl::Duration timeout)
    : state_(std::move(state)), record_(std::move(record)), timeout_(timeout) {}

PendingCollective::~PendingCollective() { (void)Wait(); }

void PendingCollective::Launched(
    c10::intrusive_ptr<c10d::Work> work, std::function<void()> finish,
    std::shared_ptr<const ReduceScatterPhases> phases) {
  // The transfer's own completion instant, whoever waits and whenever. Gloo's
  // AsyncWork completes its future before waking wait(); works without a
  // future (send, recv) throw here and keep the observed time.
  try {
    c10::intrusive_ptr<c10::ivalue::Future> future = work->getFuture();
    future->addCallback(
        [stamp = transfer_done_nanos_,
         recorder = std::weak_ptr<FlightRecorder>(state_->recorder),
         sequence = record_.sequence](c10::ivalue::Future&) {
          const absl::Time now = absl::Now();
          stamp->store(absl::ToUnixNanos(now));
          if (auto alive = recorder.lock()) alive->TransferDone(sequence, now);
        });
  } catch (const std::exception&) {
  }
  absl::MutexLock lock(&mutex_);
  work_ = std::move(work);
  finish_ = std::move(finish);
  phases_ = std::move(phases);
}

void PendingCollective::CompleteNow(const absl::Status& raw,
                                    absl::Duration wait_time) {
  absl::MutexLock lock(&mutex_);
  Complete(raw, wait_time);
}

absl::Status PendingCollective::Wait() {
  absl::MutexLock lock(&mutex_);
  if (done_) return status_;
  if (state_->abandoned() && work_ && !work_->isCompleted()) {
    // Fail fast: the rank is giving up (its step failed), and its peers may
    // never issue this collective. c10d keeps its own reference to the work.
    Complete(absl::AbortedError(absl::StrCat(
                 kGloo, ": given up, the communicator was abandoned: ",
                 state_->Health().message())),
             absl::ZeroDuration());
    return status_;
  }
  const absl::Time wait_start = absl::Now();
  state_->recorder->SetWaiting(record_.sequence, true);
  const absl::Status raw = CallGuarded(kGloo, [&] {
    if (work_) work_->wait();
    if (finish_) finish_();
  });
  if (raw.ok()) AwaitLastReference();
  Complete(raw, absl::Now() - wait_start);
  return status_;
}

void PendingCollective::AwaitLastReference() {
  // c10d's worker thread (or a background collective's own thread) keeps
  // its references to a finished work until its loop comes round, a moment
  // after the completion that woke Wait; the work's tensors (a
  // reduce-scatter's blocks, all_gather_v's replicated input) are freed with
  // the last reference. Waiting for that here frees them when Wait returns
  // (Communicator::TemporaryBytes), not on another thread a little later, so
  // a caller that bounds what is in flight bounds memory too. Bounded: a
  // work c10d keeps longer is left to it.
  if (!work_) return;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(100);
  while (work_.use_count() > 1 && absl::Now() < deadline) {
    std::this_thread::yield();
  }
  VLOG_IF(1, work_.use_count() > 1)
      << CollectiveOpName(record_.op) << " #" << record_.sequence
      << ": c10d still holds the finished work after 100 ms";
}

bool PendingCollective::IsCompleted() {
  {
    absl::MutexLock lock(&mutex_);
    if (done_) return true;
    if (work_ && !work_->isCompleted()) return false;
  }
  (void)Wait();  // does not block: the transport is done
  return true;
}

void PendingCollective::Complete(const absl::Status& raw,
                                 absl::Duration wait_time) {
  status_ = raw.ok() ? raw
                     : CollectiveFailure(record_, state_->rank,
                                         state_->world_size, timeout_, raw);
  done_ = true;
  work_.reset();
  finish_ = nullptr;
  const absl::Time now = absl::Now();
  const int64_t transfer_done_nanos = transfer_done_nanos_->load();
  record_.completed = true;
  record_.wait_return_time = now;
  record_.transfer_done_time = transfer_done_nanos > 0
                                   ? absl::FromUnixNanos(transfer_done_nanos)
                                   : now;
  record_.duration = record_.transfer_done_time - record_.issue_time;
  record_.wait_time = wait_time;
  if (phases_ != nullptr && status_.ok()) {
    record_.reduce_time = phases_->reduce;
    record_.receive_wait_time = phases_->receive_wait;
    record_.send_wait_time = phases_->send_wait;
  }
  phases_ = nullptr;
  record_.status = status_;
  state_->recorder->Completed(record_);
  if (!status_.ok()) state_->Break(status_);
  state_->log.Complete(record_);
}

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

}  // namespace mtb::collective
