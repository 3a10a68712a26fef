// Vocabulary: the *ring* holds the last `capacity` collectives this rank
// issued, oldest first; an *entry* is one of them with its *state* (issued,
// transfer_done, completed, failed). The *position* is the tool's (step,
// phase); the *counter* grows with every event, so a counter that stands
// still means no progress.
#include "common/collective/flight_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/collective/traffic.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"

namespace mtb::collective {
namespace {

int64_t Micros(absl::Time time) {
  return time == absl::Time() ? 0 : absl::ToUnixMicros(time);
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

FlightRecorder::FlightRecorder(int capacity) : capacity_(std::max(capacity, 1)) {}

void FlightRecorder::SetIdentity(const FlightIdentity& identity) {
  absl::MutexLock lock(&mutex_);
  identity_ = identity;
}

FlightIdentity FlightRecorder::identity() const {
  absl::MutexLock lock(&mutex_);
  return identity_;
}

void FlightRecorder::SetDumpPath(const std::string& path) {
  absl::MutexLock lock(&mutex_);
  dump_path_ = path;
}

std::string FlightRecorder::dump_path() const {
  absl::MutexLock lock(&mutex_);
  return dump_path_;
}

FlightRecorder::Entry* FlightRecorder::Find(int64_t sequence) {
  if (ring_.empty()) return nullptr;
  // Issued in sequence order (under the communicator's issue lock), so the
  // ring is contiguous; the search is the fallback.
  const int64_t index = sequence - ring_.front().record.sequence;
  if (index >= 0 && index < static_cast<int64_t>(ring_.size()) &&
      ring_[index].record.sequence == sequence) {
    return &ring_[index];
  }
  for (Entry& entry : ring_) {
    if (entry.record.sequence == sequence) return &entry;
  }
  return nullptr;  // fell out of the ring
}

void FlightRecorder::Issued(const CollectiveRecord& record) {
  absl::MutexLock lock(&mutex_);
  Entry entry;
  entry.record = record;
  entry.step = step_;
  entry.phase = phase_;
  ring_.push_back(std::move(entry));
  while (static_cast<int>(ring_.size()) > capacity_) ring_.pop_front();
  issued_ = std::max(issued_, record.sequence + 1);
  ++counter_;
}

void FlightRecorder::TransferDone(int64_t sequence, absl::Time when) {
  absl::MutexLock lock(&mutex_);
  Entry* entry = Find(sequence);
  if (entry == nullptr || entry->state != "issued") return;
  entry->state = "transfer_done";
  entry->record.transfer_done_time = when;
  ++counter_;
}

void FlightRecorder::Completed(const CollectiveRecord& record) {
  absl::MutexLock lock(&mutex_);
  ++counter_;
  if (record.status.ok()) {
    last_completed_ = std::max(last_completed_, record.sequence);
  }
  Entry* entry = Find(record.sequence);
  if (entry == nullptr) return;
  entry->record = record;
  entry->state = record.status.ok() ? "completed" : "failed";
  entry->waiting = false;
}

void FlightRecorder::SetWaiting(int64_t sequence, bool waiting) {
  absl::MutexLock lock(&mutex_);
  if (Entry* entry = Find(sequence); entry != nullptr) entry->waiting = waiting;
}

void FlightRecorder::SetFailure(const absl::Status& failure) {
  absl::MutexLock lock(&mutex_);
  if (first_failure_.empty() && !failure.ok()) {
    first_failure_ = std::string(failure.message());
  }
}

void FlightRecorder::SetPosition(int64_t step, absl::string_view phase, absl::Time now) {
  absl::MutexLock lock(&mutex_);
  if (step == step_ && phase == phase_) return;
  if (phase_start_ != absl::Time() && absl::StartsWith(phase_, "checkpoint")) {
    save_in_step_ += now - phase_start_;
  }
  phase_start_ = now;
  if (step != step_) {
    if (save_in_step_ > absl::ZeroDuration()) {
      last_save_ms_ = absl::ToInt64Milliseconds(save_in_step_);
    }
    save_in_step_ = absl::ZeroDuration();
    // Step 1 carries start-up costs: only steady steps say how long one takes.
    if (steady_ && step_start_ != absl::Time()) {
      last_step_ms_ = absl::ToInt64Milliseconds(now - step_start_);
      slowest_step_ms_ = std::max(slowest_step_ms_, last_step_ms_);
    }
    step_start_ = now;
  }
  step_ = step;
  phase_ = std::string(phase);
  ++counter_;
}

void FlightRecorder::MarkSteady() {
  absl::MutexLock lock(&mutex_);
  steady_ = true;
}

void FlightRecorder::MarkDone() {
  absl::MutexLock lock(&mutex_);
  done_ = true;
}

RankProgress FlightRecorder::Progress() const {
  absl::MutexLock lock(&mutex_);
  RankProgress progress;
  progress.step = step_;
  progress.phase = phase_;
  progress.last_completed = last_completed_;
  progress.issued = issued_;
  progress.counter = counter_;
  progress.steady = steady_;
  progress.done = done_;
  progress.last_step_ms = last_step_ms_;
  progress.slowest_step_ms = slowest_step_ms_;
  progress.last_save_ms = last_save_ms_;
  const Entry* in = nullptr;
  for (const Entry& entry : ring_) {
    if (entry.state != "issued" && entry.state != "transfer_done") continue;
    if (in == nullptr) in = &entry;  // the oldest in flight
    if (entry.waiting) {
      in = &entry;
      break;
    }
  }
  if (in != nullptr) {
    progress.collective = in->record.sequence;
    progress.collective_op = std::string(CollectiveOpName(in->record.op));
    progress.waiting = in->waiting;
  }
  return progress;
}

FlightRecorderDump FlightRecorder::Snapshot(absl::string_view reason) const {
  absl::MutexLock lock(&mutex_);
  FlightRecorderDump dump;
  dump.set_schema_version(kFlightRecorderSchemaVersion);
  dump.set_run_id(identity_.run_id);
  dump.set_attempt(identity_.attempt);
  dump.set_group(identity_.group);
  dump.set_rank(identity_.rank);
  dump.set_world_size(identity_.world_size);
  dump.set_host(HostName());
  dump.set_pid(static_cast<int32_t>(::getpid()));
  dump.set_reason(std::string(reason));
  dump.set_dump_time_us(absl::ToUnixMicros(absl::Now()));
  dump.set_capacity(capacity_);
  dump.set_issued(issued_);
  dump.set_last_completed(last_completed_);
  dump.set_step(step_);
  dump.set_phase(phase_);
  dump.set_first_failure(first_failure_);
  for (const Entry& entry : ring_) {
    const CollectiveRecord& record = entry.record;
    FlightEntry* out = dump.add_entries();
    out->set_sequence(record.sequence);
    out->set_op(std::string(CollectiveOpName(record.op)));
    out->set_dtype(record.dtype);
    out->set_elements(record.elements);
    out->set_size_bytes(record.size_bytes);
    out->set_bytes_sent(record.bytes_sent);
    out->set_bytes_received(record.bytes_received);
    out->set_peer(record.peer);
    out->set_algorithm(record.algorithm);
    out->set_state(entry.state);
    out->set_issue_time_us(Micros(record.issue_time));
    out->set_transfer_done_time_us(Micros(record.transfer_done_time));
    out->set_wait_return_time_us(Micros(record.wait_return_time));
    out->set_waiting(entry.waiting);
    if (!record.status.ok()) out->set_error(std::string(record.status.message()));
    out->set_step(entry.step);
    out->set_phase(entry.phase);
    for (int64_t count : record.send_counts) out->add_send_counts(count);
    for (int64_t count : record.recv_counts) out->add_recv_counts(count);
  }
  return dump;
}

absl::Status FlightRecorder::Dump(absl::string_view reason) const {
  const std::string path = dump_path();
  if (path.empty()) return absl::OkStatus();
  const FlightRecorderDump dump = Snapshot(reason);
  if (absl::Status made = CreateDirectories(DirectoryOf(path)); !made.ok()) {
    return made;
  }
  return WriteJsonFile(dump, path);
}

std::string FlightDumpFileName(const FlightIdentity& identity) {
  return absl::StrCat("flight_", identity.run_id, ".attempt", identity.attempt,
                      ".rank", identity.rank, ".json");
}

}  // namespace mtb::collective
