// One record per collective call, running totals and an observer hook: what
// tools read to report bytes moved per step, to write traces and to check the
// order in which collectives were issued.
//
// Torch-free; the Communicator (communicator.h) fills it.
#ifndef MTB_COMMON_COLLECTIVE_COLLECTIVE_LOG_H_
#define MTB_COMMON_COLLECTIVE_COLLECTIVE_LOG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/collective/traffic.h"

namespace mtb::collective {

struct CollectiveRecord {
  // This communicator's own counter: the n-th collective issued on it, from 0.
  // Every rank numbers the same call alike (they issue in the same order).
  int64_t sequence = -1;
  CollectiveOp op = CollectiveOp::kBarrier;
  // The caller's dtype ("float32", "bfloat16"), and the dtype the transport
  // carried: the same, "float16" for 2-byte dtypes Gloo rejects moved bit for
  // bit by copy-only collectives, "float32" for emulated bf16 reductions.
  std::string dtype;
  std::string transport_dtype;
  // Elements and bytes of S, the buffer in nccl-tests' size convention
  // (traffic.h), in the caller's dtype.
  int64_t elements = 0;
  int64_t size_bytes = 0;
  // Bytes this rank sends and receives (traffic.h); for emulated bf16
  // reductions the fp32 bytes actually moved.
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  // What ran, e.g. "gloo_allreduce", "gloo_allgather_list",
  // "gloo_alltoall_base+local_sum", "gloo_reduce_scatter_halving_doubling".
  std::string algorithm;
  // "sum", "avg", "max", "min" for reductions, empty otherwise.
  std::string reduce_op;
  // True when values were converted for the transport (bf16 reduced in fp32,
  // rounded back once); bit-for-bit moves are not emulated.
  bool emulated = false;
  // The peer of send/recv and the root of broadcast; -1 otherwise.
  int peer = -1;
  // The v-collectives' splits, in rows along dim 0 (empty for the others):
  // all_to_allv the rows this rank sends to and receives from each rank,
  // all_gather_v every rank's rows (recv_counts). Ranks agree when what r
  // sends to j is what j receives from r; each rank's own size differs.
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;
  // Three instants, on this host's clock:
  //  - issue_time: the call was handed to c10d (under the issue lock);
  //  - transfer_done_time: the transport finished, stamped by the c10d work's
  //    completion callback on Gloo's worker thread, so a caller that waits
  //    late does not stretch it. Ops whose c10d work has no future (send,
  //    recv) and ops run on the calling thread stamp it when their completion
  //    is observed, i.e. it equals wait_return_time there;
  //  - wait_return_time: the caller's Wait() (or the IsCompleted() that
  //    observed completion) returned, after any finish step (the local sum of
  //    an all-to-all reduce-scatter, bf16 copy-back, avg's division).
  // All zero (absl::Time()) until completed, except issue_time.
  absl::Time issue_time;
  absl::Time transfer_done_time;
  absl::Time wait_return_time;
  // "In flight": issue_time -> transfer_done_time.
  absl::Duration duration = absl::ZeroDuration();
  // The time the caller spent blocked in Wait() (the exposed communication
  // time of an overlapped, async collective); at most wait_return_time -
  // issue_time, and zero when the transfer was already done.
  absl::Duration wait_time = absl::ZeroDuration();
  // Reduce-scatter(-v) only, zero elsewhere: where its time went on the
  // thread that reduced. reduce_time: the local reductions (alltoall: the sum
  // after the transfer, in the finish step; chunked: the combinations between
  // its steps). Chunked also: receive_wait_time, blocked until a step's
  // chunks had arrived, and send_wait_time, until its sent chunks had left.
  absl::Duration reduce_time = absl::ZeroDuration();
  absl::Duration receive_wait_time = absl::ZeroDuration();
  absl::Duration send_wait_time = absl::ZeroDuration();
  bool completed = false;
  // OK, or why the collective failed.
  absl::Status status;
};

struct CollectiveTotals {
  int64_t calls = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  // Sum of the records' durations and wait times.
  absl::Duration duration = absl::ZeroDuration();
  absl::Duration wait_time = absl::ZeroDuration();
};

enum class CollectiveEvent {
  kIssued,     // the record has no duration yet
  kCompleted,  // successfully or not: see record.status
};

// Called on the thread that issued (kIssued) or observed the completion of
// (kCompleted) a collective, with no lock of the log held. It must not block
// for long; it may call the log's accessors (but not add or remove
// observers).
using CollectiveObserver =
    std::function<void(CollectiveEvent, const CollectiveRecord&)>;

// Thread-safe.
class CollectiveLog {
 public:
  // keep_records = false keeps only the totals (long runs that never read the
  // records).
  explicit CollectiveLog(bool keep_records = true)
      : keep_records_(keep_records) {}

  // Assigns the next sequence number to `record`, stamps the issue time when
  // unset, notifies the observer and returns the stamped record.
  CollectiveRecord Issue(CollectiveRecord record);
  // Records a completion (record.completed = true, duration, wait_time and
  // status filled by the caller). Successful ones count in the totals.
  void Complete(const CollectiveRecord& record);

  // Completed records, in the order their completion was observed.
  std::vector<CollectiveRecord> Records() const;
  // The same, and forgets them (totals stay).
  std::vector<CollectiveRecord> TakeRecords();
  // Over every successful collective since creation.
  CollectiveTotals Totals() const;
  std::map<CollectiveOp, CollectiveTotals> TotalsByOp() const;
  // Issued but not yet completed.
  int64_t InFlight() const;
  // Sequence number the next collective will get.
  int64_t NextSequence() const;

  // Any number of observers (a trace writer, a byte counter, a test) see
  // every event, in the order they were added. The id removes it; after
  // RemoveObserver returns it is not called again from a new event (one
  // already being delivered on another thread may still finish).
  using ObserverId = int64_t;
  ObserverId AddObserver(CollectiveObserver observer);
  void RemoveObserver(ObserverId id);

 private:
  void Notify(CollectiveEvent event, const CollectiveRecord& record) const;

  const bool keep_records_;
  mutable absl::Mutex mutex_;
  int64_t next_sequence_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<CollectiveRecord> records_ ABSL_GUARDED_BY(mutex_);
  CollectiveTotals totals_ ABSL_GUARDED_BY(mutex_);
  std::map<CollectiveOp, CollectiveTotals> totals_by_op_
      ABSL_GUARDED_BY(mutex_);
  ObserverId next_observer_id_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<std::pair<ObserverId, CollectiveObserver>> observers_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_COLLECTIVE_LOG_H_
