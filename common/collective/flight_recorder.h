// The flight recorder (NCCL's idea, our collectives): each rank keeps a ring
// of its last N collectives — sequence number, op, dtype, bytes, the issued /
// transfer-done / wait-returned instants and state — and where the tool says
// it is (step, phase). It is what a heartbeat reports (heartbeat.h) and what
// is dumped (as FlightRecorderDump JSON) when a collective fails or times
// out, on a fatal signal and on the launcher's teardown (flight_dumps.h), so
// `profiler_agg forensics` can name the rank the group waited for.
//
// The Communicator feeds it (communicator.h: flight_recorder()); tools call
// SetPosition and MarkSteady. Torch-free. Thread-safe.
#ifndef MTB_COMMON_COLLECTIVE_FLIGHT_RECORDER_H_
#define MTB_COMMON_COLLECTIVE_FLIGHT_RECORDER_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/collective/collective_log.h"
#include "common/collective/flight_recorder.pb.h"

namespace mtb::collective {

inline constexpr int kFlightRecorderSchemaVersion = 1;
inline constexpr int kDefaultFlightRecorderEntries = 256;

// Where a rank is, as a heartbeat carries it (heartbeat.h).
struct RankProgress {
  int64_t step = 0;
  std::string phase;
  // The collective it is in: the one a caller is blocked in Wait() on, else
  // the oldest issued and not completed; -1 when none is in flight.
  int64_t collective = -1;
  std::string collective_op;
  // A caller is blocked in Wait() on `collective`.
  bool waiting = false;
  int64_t last_completed = -1;
  int64_t issued = 0;
  // Grows with every phase change, issue, transfer end and completion: the
  // launcher reads a rank whose counter stands still as making no progress.
  int64_t counter = 0;
  // The tool's start-up is over (its first step, sweep point or check is
  // done): the launcher's heartbeat watch applies from then on.
  bool steady = false;
  // The communicator is gone (the rank is finishing): no more heartbeats.
  bool done = false;
  // Step times once steady (from one step's start to the next's, a save
  // included), and the last save's time (checkpoint_* phases): the launcher
  // sizes its automatic heartbeat timeout and its SIGTERM grace from them.
  // 0 until known.
  int64_t last_step_ms = 0;
  int64_t slowest_step_ms = 0;
  int64_t last_save_ms = 0;
};

// Who the dumps are from.
struct FlightIdentity {
  int rank = 0;
  int world_size = 1;
  std::string group;
  std::string run_id = "none";
  int attempt = 0;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(int capacity = kDefaultFlightRecorderEntries);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  void SetIdentity(const FlightIdentity& identity);
  FlightIdentity identity() const;
  // Dump() writes here (created with its folder, written atomically); empty
  // (the default): Dump() writes nothing.
  void SetDumpPath(const std::string& path);
  std::string dump_path() const;

  // --- From the communicator (communicator_internal.h). ---
  void Issued(const CollectiveRecord& record);
  // Gloo's worker thread: the transport of `sequence` finished at `when`.
  void TransferDone(int64_t sequence, absl::Time when);
  void Completed(const CollectiveRecord& record);
  // A caller starts (true) or stops (false) blocking on `sequence`.
  void SetWaiting(int64_t sequence, bool waiting);
  // The communicator's first failure (kept; later ones are ignored).
  void SetFailure(const absl::Status& failure);

  // --- From the tool. ---
  // Where the rank is: the trainer's step and phase, comm_bench's sweep
  // point and op, moe_comm's configuration and phase. A new step ends the
  // previous one (its time counts once steady); time in phases named
  // "checkpoint..." is the step's save.
  void SetPosition(int64_t step, absl::string_view phase, absl::Time now = absl::Now());
  // Start-up is over (RankProgress::steady).
  void MarkSteady();
  void MarkDone();

  RankProgress Progress() const;
  FlightRecorderDump Snapshot(absl::string_view reason) const;
  // Snapshot(reason) as JSON to dump_path(); OK without writing when no path
  // is set. Errors name the path.
  absl::Status Dump(absl::string_view reason) const;

 private:
  struct Entry {
    CollectiveRecord record;
    std::string state = "issued";
    bool waiting = false;
    int64_t step = 0;
    std::string phase;
  };
  Entry* Find(int64_t sequence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const int capacity_;
  mutable absl::Mutex mutex_;
  FlightIdentity identity_ ABSL_GUARDED_BY(mutex_);
  std::string dump_path_ ABSL_GUARDED_BY(mutex_);
  std::deque<Entry> ring_ ABSL_GUARDED_BY(mutex_);  // oldest first
  int64_t issued_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t last_completed_ ABSL_GUARDED_BY(mutex_) = -1;
  int64_t counter_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mutex_) = 0;
  std::string phase_ ABSL_GUARDED_BY(mutex_);
  bool steady_ ABSL_GUARDED_BY(mutex_) = false;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Time step_start_ ABSL_GUARDED_BY(mutex_);
  absl::Time phase_start_ ABSL_GUARDED_BY(mutex_);
  absl::Duration save_in_step_ ABSL_GUARDED_BY(mutex_);
  int64_t last_step_ms_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t slowest_step_ms_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t last_save_ms_ ABSL_GUARDED_BY(mutex_) = 0;
  std::string first_failure_ ABSL_GUARDED_BY(mutex_);
};

// "flight_<run_id>.attempt<a>.rank<r>.json": the file a rank's dumps go to
// in a --log_dir (or beside the result); `profiler_agg forensics` reads every
// flight_*.json of a folder.
std::string FlightDumpFileName(const FlightIdentity& identity);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_FLIGHT_RECORDER_H_
