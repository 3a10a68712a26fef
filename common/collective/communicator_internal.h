// Internal to common/collective: the parts of the Communicator that see c10d.
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
//
// Files: pending_collective.cc (PendingCollective, CollectiveHandle),
// communicator.cc (creation, settings, the issue protocol),
// copy_collectives.cc and reduce_collectives.cc (one method per collective).
#ifndef MTB_COMMON_COLLECTIVE_COMMUNICATOR_INTERNAL_H_
#define MTB_COMMON_COLLECTIVE_COMMUNICATOR_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/collective/collective_log.h"
#include "common/collective/communicator.h"
#include "common/collective/flight_recorder.h"
#include "common/collective/heartbeat.h"
#include "common/collective/point_to_point_collectives.h"
#include "common/collective/process_group.h"
#include "common/collective/shm_transport.h"
#include "common/collective/tensor_checks.h"
#include "common/collective/traffic.h"

namespace mtb::collective {

// Prefix CallGuarded puts on Gloo's messages; CollectiveFailure replaces it.
inline constexpr absl::string_view kGloo = "gloo";

// The tensors a communicator allocated for its collectives (a reduce-scatter's
// blocks, all_gather_v's replicated input, emulated transports), held weakly:
// each counts only while something (a pending collective's finish step,
// c10d's work) keeps it alive (Communicator::TemporaryBytes). Thread-safe.
class TemporaryRegistry {
 public:
  void Track(const at::Tensor& tensor);
  int64_t LiveBytes();

 private:
  absl::Mutex mutex_;
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> storages_
      ABSL_GUARDED_BY(mutex_);
};

// What Communicator::Create set up for shared memory (communicator.cc).
struct ShmSetup {
  std::unique_ptr<ShmGroup> shm;  // null: Gloo only
  std::vector<int> local_ranks;   // global ranks on this host, ascending
  int hosts = 1;
  // Hierarchical (hosts > 1), on each host's lowest rank only: the Gloo
  // group of those ranks, host index = rank in it.
  c10::intrusive_ptr<GlooProcessGroup> leaders;
};

// State shared by a communicator and its pending collectives (which may
// outlive it).
struct CommState {
  CommState(int rank, int world_size, bool keep_records,
            int flight_recorder_entries = kDefaultFlightRecorderEntries)
      : rank(rank),
        world_size(world_size),
        log(keep_records),
        recorder(std::make_shared<FlightRecorder>(flight_recorder_entries)) {}

  absl::Status Health() const;
  // Keeps the first failure; later ones change nothing. The first one is
  // also the flight recorder's, and dumps it (when it has a dump path).
  void Break(const absl::Status& failure);
  // Communicator::Abandon: breaks it, and from now on pending collectives
  // are given up instead of waited for.
  void Abandon(const absl::Status& why);
  bool abandoned() const { return abandoned_flag.load(); }

  const int rank;
  const int world_size;
  CollectiveLog log;
  TemporaryRegistry temporaries;
  // The last collectives and the tool's position (flight_recorder.h).
  const std::shared_ptr<FlightRecorder> recorder;
  mutable absl::Mutex mutex;
  absl::Status first_failure ABSL_GUARDED_BY(mutex);
  std::atomic<bool> abandoned_flag{false};
};

// "all_reduce #17 (float32, 4096 elements) on rank 1 of 3 failed after
// timeout 2s: <what Gloo said>"; `raw` is a CallGuarded(kGloo, ...) status
// and keeps its code (kDeadlineExceeded, kUnavailable, ...).
absl::Status CollectiveFailure(const CollectiveRecord& record, int rank,
                               int world_size, absl::Duration timeout,
                               const absl::Status& raw);

class PendingCollective {
 public:
  // Refused before issue: never logged, no sequence number.
  explicit PendingCollective(absl::Status refusal);
  PendingCollective(std::shared_ptr<CommState> state, CollectiveRecord record,
                    absl::Duration timeout);
  // Waits for what is still running: a dropped handle still completes its
  // record and, on failure, breaks the communicator. Once the communicator is
  // abandoned it gives the collective up instead (no wait).
  ~PendingCollective();

  // The c10d work to wait for and the finish step after it (may be empty);
  // `phases` (may be null) is filled by then and copied into the record.
  void Launched(c10::intrusive_ptr<c10d::Work> work,
                std::function<void()> finish,
                std::shared_ptr<const ReduceScatterPhases> phases = nullptr);
  // For a collective that ran on the issuing thread (blocked for
  // `wait_time`) or failed to issue: `raw` is its CallGuarded(kGloo, ...)
  // status.
  void CompleteNow(const absl::Status& raw, absl::Duration wait_time);

  absl::Status Wait();
  bool IsCompleted();
  int64_t sequence() const { return record_.sequence; }

 private:
  void Complete(const absl::Status& raw, absl::Duration wait_time)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // After a successful wait: until this is the work's last reference (at
  // most 100 ms), so its tensors are freed by Complete.
  void AwaitLastReference() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::shared_ptr<CommState> state_;
  CollectiveRecord record_;
  const absl::Duration timeout_ = absl::ZeroDuration();
  absl::Mutex mutex_;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mutex_);
  c10::intrusive_ptr<c10d::Work> work_ ABSL_GUARDED_BY(mutex_);
  // Unix nanoseconds at which the c10d work's future completed (0 until
  // then): written by Gloo's worker thread through the future's callback,
  // which holds its own reference, so it may outlive this object.
  std::shared_ptr<std::atomic<int64_t>> transfer_done_nanos_ =
      std::make_shared<std::atomic<int64_t>>(0);
  std::function<void()> finish_ ABSL_GUARDED_BY(mutex_);
  std::shared_ptr<const ReduceScatterPhases> phases_ ABSL_GUARDED_BY(mutex_);
};

// Argument checks, records and the c10d calls. Every collective holds
// issue_mutex_ for its whole issue.
class Communicator::Impl {
 public:
  Impl(std::shared_ptr<CommState> state, Store store, GlooDevices devices,
       c10::intrusive_ptr<GlooProcessGroup> group,
       const CommunicatorOptions& options, ShmSetup shm);
  // Abandoned: leaks the process group instead of destroying it, since
  // ProcessGroupGloo's destructor waits for its queued work (which may be a
  // collective the peers never issue) until the timeout.
  ~Impl();

  int rank() const { return state_->rank; }
  int world_size() const { return state_->world_size; }
  CommState& state() { return *state_; }
  const std::string& device_description() const { return devices_.description; }
  absl::string_view transport() const {
    return !shm_ ? "tcp" : (hierarchical() ? "shm+tcp" : "shm");
  }
  // Shared memory within hosts, Gloo among their leaders.
  bool hierarchical() const { return shm_ != nullptr && hosts_ > 1; }
  // Shared memory for ops without a hierarchical path (every rank on one
  // host).
  bool flat_shm() const { return shm_ != nullptr && hosts_ == 1; }
  const Store& store() const { return store_; }
  absl::Duration timeout() const;
  absl::Status SetTimeout(absl::Duration timeout);
  void SetReduceScatterAlgorithm(ReduceScatterAlgorithm algorithm);
  ReduceScatterAlgorithm reduce_scatter_algorithm() const;
  void SetAllGatherAlgorithm(AllGatherAlgorithm algorithm);
  AllGatherAlgorithm all_gather_algorithm() const;
  void SetAllReduceAlgorithm(AllReduceAlgorithm algorithm);
  AllReduceAlgorithm all_reduce_algorithm() const;

  // reduce_collectives.cc
  CollectiveHandle AllReduce(const at::Tensor& tensor, ReduceOp op);
  CollectiveHandle ReduceScatter(const at::Tensor& input,
                                 const at::Tensor& output, ReduceOp op);
  CollectiveHandle ReduceScatterV(const at::Tensor& input,
                                  const at::Tensor& output,
                                  absl::Span<const int64_t> counts,
                                  ReduceOp op);
  // copy_collectives.cc
  CollectiveHandle Broadcast(const at::Tensor& tensor, int root);
  CollectiveHandle AllGather(const at::Tensor& input, const at::Tensor& output);
  CollectiveHandle AllGatherList(const at::Tensor& input,
                                 const std::vector<at::Tensor>& outputs);
  CollectiveHandle AllGatherV(const at::Tensor& input, const at::Tensor& output,
                              absl::Span<const int64_t> counts);
  CollectiveHandle AllToAll(const at::Tensor& input, const at::Tensor& output);
  CollectiveHandle AllToAllV(const at::Tensor& input, const at::Tensor& output,
                             absl::Span<const int64_t> send_counts,
                             absl::Span<const int64_t> recv_counts);
  CollectiveHandle Barrier();
  CollectiveHandle PointToPoint(CollectiveOp kind, const at::Tensor& tensor,
                                int peer, int tag);

  // shm_collectives.cc: the same collectives over shared memory, called by
  // the methods above once the arguments are checked and the record made
  // (shm_ set). Tensors are the caller's (or the reduction's transport
  // tensor), contiguous.
  CollectiveHandle ShmAllReduce(CollectiveRecord record, const at::Tensor& flat,
                                ReduceOp op, std::function<void()> finish)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // blocks[p]: this rank's input for rank p (block_elements[p] elements).
  CollectiveHandle ShmReduceScatter(CollectiveRecord record,
                                    const at::Tensor& flat_input,
                                    std::vector<int64_t> block_elements,
                                    const at::Tensor& result, ReduceOp op,
                                    std::function<void()> finish)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // outputs[p] receives rank p's input (hierarchical: through a uint8
  // all-reduce of the zero-filled output, bit-exact for any dtype).
  CollectiveHandle ShmAllGather(CollectiveRecord record, const at::Tensor& input,
                                std::vector<at::Tensor> outputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  CollectiveHandle ShmBroadcast(CollectiveRecord record, const at::Tensor& tensor,
                                int root) ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // inputs[p] goes to rank p; outputs[p] receives rank p's block.
  CollectiveHandle ShmAllToAll(CollectiveRecord record, std::vector<at::Tensor> inputs,
                               std::vector<at::Tensor> outputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  CollectiveHandle ShmBarrier(CollectiveRecord record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  bool shm() const { return shm_ != nullptr; }

 private:
  struct Launched {
    c10::intrusive_ptr<c10d::Work> work;
    std::function<void()> finish;  // may be empty
    // Reduce-scatter's time split, written before the work (or its finish
    // step) completes; may be null.
    std::shared_ptr<const ReduceScatterPhases> phases = nullptr;
  };

  // "all_gather on rank 1 of 3": the start of every message.
  std::string What(CollectiveOp kind) const;
  // OK, or kFailedPrecondition naming the first failure.
  absl::Status Usable(CollectiveOp kind) const;
  // A call that did not issue: this rank skipped a collective its peers may
  // be in, so the communicator breaks (a no-op when already broken).
  CollectiveHandle Refuse(const absl::Status& problem);
  absl::Status CheckRank(absl::string_view what, absl::string_view name,
                         int value) const;
  // Both tensors valid for `use`, same dtype, at least 1-D, same dims 1..
  static absl::Status CheckRowTensors(absl::string_view what,
                                      const at::Tensor& input,
                                      const at::Tensor& output, TensorUse use);

  // `s_tensor` is the tensor whose size is S (traffic.h).
  static CollectiveRecord NewRecord(CollectiveOp kind, const at::Tensor& caller,
                                    const at::Tensor& transport,
                                    const at::Tensor& s_tensor);
  static void SetTraffic(CollectiveRecord& record, Traffic traffic);
  static void SetReduction(CollectiveRecord& record, ReduceOp op,
                           const TransportTensor& transport);
  // After a reduction into `transport`: avg's division, then the copy back to
  // the caller's bfloat16 tensor when emulated. Empty when neither applies.
  std::function<void()> FinishReduction(const TransportTensor& transport,
                                        const at::Tensor& caller,
                                        ReduceOp op) const;

  // blocks: n tensors of input.numel() elements; blocks[p] receives rank p's
  // input.
  CollectiveHandle IssueAllGatherList(CollectiveOp kind,
                                      const at::Tensor& input,
                                      std::vector<at::Tensor> blocks,
                                      absl::string_view algorithm)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // block_elements[p]: flat elements of input reduced onto rank p.
  CollectiveHandle IssueReduceScatter(CollectiveRecord record,
                                      const at::Tensor& input,
                                      const at::Tensor& output,
                                      std::vector<int64_t> block_elements,
                                      ReduceOp op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // A tag from kFirstReservedTag up for one send/recv collective: every rank
  // draws them in the same (issue) order, so a collective's messages never
  // match another's, even when two run at once.
  int NextReservedTag() ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // The second gloo context, built at first use (collective; throws).
  std::shared_ptr<::gloo::Context> HalvingDoublingContext()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);

  // Issues `record` and runs `launch` (which calls c10d and returns the work)
  // under CallGuarded.
  CollectiveHandle Launch(CollectiveRecord record,
                          const std::function<Launched()>& launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // Issues `record` and queues `body` on the shm worker with the
  // collective's deadline (timeout from when it starts running).
  CollectiveHandle LaunchShm(CollectiveRecord record,
                             std::function<void(ShmGroup&, absl::Time)> body,
                             std::function<void()> finish)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);
  // Issues `record` and runs it to completion on this thread.
  CollectiveHandle RunNow(CollectiveRecord record,
                          const std::function<void()>& run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mutex_);

  const std::shared_ptr<CommState> state_;
  const Store store_;
  const GlooDevices devices_;
  const c10::intrusive_ptr<GlooProcessGroup> group_;
  mutable absl::Mutex issue_mutex_;
  absl::Duration timeout_ ABSL_GUARDED_BY(issue_mutex_);
  ReduceScatterAlgorithm reduce_scatter_algorithm_
      ABSL_GUARDED_BY(issue_mutex_);
  const int64_t reduce_scatter_chunk_bytes_;
  const int reduce_scatter_depth_;
  AllGatherAlgorithm all_gather_algorithm_ ABSL_GUARDED_BY(issue_mutex_);
  AllReduceAlgorithm all_reduce_algorithm_ ABSL_GUARDED_BY(issue_mutex_);
  int reserved_tag_counter_ ABSL_GUARDED_BY(issue_mutex_) = 0;
  std::shared_ptr<::gloo::rendezvous::Context> halving_doubling_context_
      ABSL_GUARDED_BY(issue_mutex_);
  int halving_doubling_generation_ ABSL_GUARDED_BY(issue_mutex_) = 0;
  // Shared memory (null: Gloo for everything) and the thread that runs its
  // collectives in issue order; the worker goes first. Hierarchical: hosts_
  // > 1, shm_ is this host's group, leaders_ the leaders' Gloo group (on
  // leaders).
  const int hosts_;
  const std::vector<int> shm_ranks_;
  const c10::intrusive_ptr<GlooProcessGroup> leaders_;
  std::unique_ptr<ShmGroup> shm_;
  std::unique_ptr<SerialWorker> shm_worker_;

 public:
  // Communicator::StartHeartbeat's sender; stopped before the group goes.
  std::unique_ptr<HeartbeatSender> heartbeat;
};

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_COMMUNICATOR_INTERNAL_H_
