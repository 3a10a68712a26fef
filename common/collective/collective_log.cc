#include "common/collective/collective_log.h"

#include <algorithm>
#include <utility>

namespace mtb::collective {
namespace {

void Add(const CollectiveRecord& record, CollectiveTotals& totals) {
  ++totals.calls;
  totals.bytes_sent += record.bytes_sent;
  totals.bytes_received += record.bytes_received;
  totals.duration += record.duration;
  totals.wait_time += record.wait_time;
}

}  // namespace

CollectiveRecord CollectiveLog::Issue(CollectiveRecord record) {
  {
    absl::MutexLock lock(&mutex_);
    record.sequence = next_sequence_++;
    ++in_flight_;
  }
  if (record.issue_time == absl::Time()) record.issue_time = absl::Now();
  Notify(CollectiveEvent::kIssued, record);
  return record;
}

void CollectiveLog::Complete(const CollectiveRecord& record) {
  {
    absl::MutexLock lock(&mutex_);
    --in_flight_;
    if (record.status.ok()) {
      Add(record, totals_);
      Add(record, totals_by_op_[record.op]);
    }
    if (keep_records_) records_.push_back(record);
  }
  Notify(CollectiveEvent::kCompleted, record);
}

std::vector<CollectiveRecord> CollectiveLog::Records() const {
  absl::MutexLock lock(&mutex_);
  return records_;
}

std::vector<CollectiveRecord> CollectiveLog::TakeRecords() {
  absl::MutexLock lock(&mutex_);
  return std::exchange(records_, {});
}

CollectiveTotals CollectiveLog::Totals() const {
  absl::MutexLock lock(&mutex_);
  return totals_;
}

std::map<CollectiveOp, CollectiveTotals> CollectiveLog::TotalsByOp() const {
  absl::MutexLock lock(&mutex_);
  return totals_by_op_;
}

int64_t CollectiveLog::InFlight() const {
  absl::MutexLock lock(&mutex_);
  return in_flight_;
}

int64_t CollectiveLog::NextSequence() const {
  absl::MutexLock lock(&mutex_);
  return next_sequence_;
}

CollectiveLog::ObserverId CollectiveLog::AddObserver(
    CollectiveObserver observer) {
  absl::MutexLock lock(&mutex_);
  const ObserverId id = next_observer_id_++;
  observers_.emplace_back(id, std::move(observer));
  return id;
}

void CollectiveLog::RemoveObserver(ObserverId id) {
  absl::MutexLock lock(&mutex_);
  observers_.erase(
      std::remove_if(observers_.begin(), observers_.end(),
                     [id](const auto& entry) { return entry.first == id; }),
      observers_.end());
}

void CollectiveLog::Notify(CollectiveEvent event,
                           const CollectiveRecord& record) const {
  // Copies, so that an observer runs without the lock (it may read the log).
  std::vector<std::pair<ObserverId, CollectiveObserver>> observers;
  {
    absl::MutexLock lock(&mutex_);
    if (observers_.empty()) return;
    observers = observers_;
  }
  for (const auto& [id, observer] : observers) observer(event, record);
}

}  // namespace mtb::collective
