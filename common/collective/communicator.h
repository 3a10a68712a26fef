// The collective layer every multi-rank tool uses: c10d's ProcessGroupGloo
// behind one class, with Gloo's gaps filled, one record per call and errors as
// Status. docs/collective.md is the one-page guide (byte model, reduce-scatter
// choice, bf16, error and timeout policy).
//
// Tensors are CPU, contiguous and non-empty-shaped as documented per method;
// every precondition is checked before any communication and reported as
// kInvalidArgument naming the argument and the arithmetic. Shapes are written
// with n = world_size, r = this rank.
//
// Dtypes: float32, float64, float16, int8, uint8, int32, int64 natively.
// bfloat16 (which Gloo 1.13 rejects): copy-only collectives (broadcast,
// all_gather*, all_to_all*, send, recv) move its bits as float16 (Gloo rejects
// int16 too), bit-exact; reductions convert to float32, reduce, and round back
// to bfloat16 once (record.emulated = true, bytes counted in float32). int16
// and bool are accepted by copy-only collectives the same way (as float16 and
// uint8 bits).
#ifndef MTB_COMMON_COLLECTIVE_COMMUNICATOR_H_
#define MTB_COMMON_COLLECTIVE_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/collective/collective_log.h"
#include "common/collective/flight_recorder.h"
#include "common/collective/store.h"
#include "common/collective/transport.h"

namespace mtb::collective {

enum class ReduceOp {
  kSum,
  kAvg,  // sum, then divided by n locally; floating dtypes only
  kMax,
  kMin,
};
absl::string_view ReduceOpName(ReduceOp op);

// How ReduceScatter and ReduceScatterV run (docs/collective.md, "Reduce-scatter").
// Every rank of a communicator must use the same one.
enum class ReduceScatterAlgorithm {
  // The measured default: kAllToAll below an input of 4 MiB at 2 ranks and
  // 16 MiB from 3 ranks, kChunked from there up (docs/collective.md,
  // "Reduce-scatter"; ChooseReduceScatter in reduce_collectives.cc).
  kAuto,
  // c10d alltoall_base (rank p receives every rank's p-th block) + a local
  // reduction over the n received blocks. Asynchronous like any c10d op.
  kAllToAll,
  // gloo::ReduceScatterHalvingDoubling on a second gloo context connected
  // through the same store (created at the first use; every rank creates it at
  // the same call). Runs on the calling thread: its Async variant has finished
  // when it returns. float32/float64/int32/int64 only; other dtypes, and calls
  // with an empty block, use kAllToAll (the record says which ran).
  kHalvingDoubling,
  // c10d send/recv straight from views of the input, in chunks of
  // CommunicatorOptions::reduce_scatter_chunk_bytes per peer,
  // reduce_scatter_depth chunks in flight: chunks c+1.. move while chunk c is
  // reduced, so staging stays at depth (n-1) chunks whatever the size (no
  // full-size temporary). Runs on a thread of its own per call; asynchronous
  // like any c10d op.
  kChunked,
};
absl::string_view ReduceScatterAlgorithmName(ReduceScatterAlgorithm algorithm);
// "auto", "alltoall", "halving_doubling", "chunked" (flag values).
absl::StatusOr<ReduceScatterAlgorithm> ParseReduceScatterAlgorithm(
    absl::string_view name);

// How AllGather (the flat one) runs (docs/collective.md, "All-gather").
// Every rank of a communicator must use the same one.
enum class AllGatherAlgorithm {
  // The measured default (docs/collective.md, "All-gather"; ChooseAllGather
  // in copy_collectives.cc).
  kAuto,
  // c10d's list allgather on views of the output (stages the whole output in
  // a temporary inside c10d and copies it out).
  kList,
  // c10d send/recv: the input goes to every peer at once and each peer's
  // block is received straight into its view of the output; no temporary.
  // Runs on a thread of its own per call; asynchronous like any c10d op.
  kDirect,
};
absl::string_view AllGatherAlgorithmName(AllGatherAlgorithm algorithm);
// "auto", "list", "direct" (flag values).
absl::StatusOr<AllGatherAlgorithm> ParseAllGatherAlgorithm(
    absl::string_view name);

// How AllReduce runs (docs/collective.md, "All-reduce"). Every rank of a
// communicator must use the same one.
enum class AllReduceAlgorithm {
  // The measured default: kBcube below 2 MiB from 3 ranks (float32/64,
  // int32/64), kRing otherwise (docs/collective.md, "All-reduce";
  // ChooseAllReduce in reduce_collectives.cc).
  kAuto,
  // c10d's Gloo allreduce, which calls gloo::allreduce without choosing an
  // algorithm: Gloo's ring (reduce-scatter then all-gather around the ring,
  // 1 MiB segments, two in flight). Record: "gloo_allreduce".
  kRing,
  // gloo::allreduce with Gloo's BCUBE algorithm on the second gloo context
  // (as kHalvingDoubling). float32/float64/int32/int64; other dtypes use
  // kRing (the record says so). Runs on a thread of its own per call.
  kBcube,
  // Our ReduceScatter (kChunked, in place) then our flat all-gather (direct
  // send/recv) on one thread of its own per call; blocks as even as the size
  // allows (the first numel % n ranks hold one element more).
  kReduceScatterAllGather,
};
absl::string_view AllReduceAlgorithmName(AllReduceAlgorithm algorithm);
// "auto", "ring", "bcube", "reduce_scatter_all_gather" (flag values).
absl::StatusOr<AllReduceAlgorithm> ParseAllReduceAlgorithm(absl::string_view name);

// Point-to-point tags from this value up belong to the communicator's own
// send/recv collectives (kChunked, kDirect); Send and Recv refuse them.
inline constexpr int kFirstReservedTag = 1 << 30;

struct CommunicatorOptions {
  int rank = 0;
  int world_size = 1;
  // Per collective: a collective that has not completed this long after it
  // started on this rank fails with kDeadlineExceeded (Gloo's own timeout).
  absl::Duration timeout = absl::Minutes(10);
  // Where Gloo binds: an interface name (comma-separated list allowed), else
  // an address or host name, else GLOO_SOCKET_IFNAME, else c10d's default
  // device (this host's name).
  std::string gloo_interface;
  std::string gloo_hostname;
  ReduceScatterAlgorithm reduce_scatter_algorithm =
      ReduceScatterAlgorithm::kAuto;
  // kChunked's chunk: bytes of one peer's block moved per step (the last
  // chunk may be shorter). Positive.
  int64_t reduce_scatter_chunk_bytes = 1 << 20;
  // kChunked's steps in flight (staging slots). Positive.
  int reduce_scatter_depth = 2;
  AllGatherAlgorithm all_gather_algorithm = AllGatherAlgorithm::kAuto;
  AllReduceAlgorithm all_reduce_algorithm = AllReduceAlgorithm::kAuto;
  Transport transport = Transport::kAuto;
  // This rank's host identity; empty: HostIdentity() (shm_transport.h). Tests
  // set it to put thread ranks on different "hosts".
  std::string host_id;
  // Shared memory: data bytes of one slot of one rank and slots per rank
  // (larger messages are streamed through them; all-reduce and broadcast
  // copy the next chunk in while this one is finished). >= 4 KiB; >= 2 slots.
  int64_t shm_slot_bytes = int64_t{1} << 20;
  int shm_slots = 2;
  // Test only: the shared-memory algorithms assign slices and blocks to the
  // wrong rank on this rank, to show that the tests catch it.
  bool testonly_shm_misassign_slices = false;
  // Keep every CollectiveRecord (log().Records()); false keeps totals only.
  bool keep_records = true;
  // The flight recorder's ring: the last this many collectives.
  int flight_recorder_entries = kDefaultFlightRecorderEntries;
};

class PendingCollective;

// A collective in flight. Copyable; copies share the collective. Holds
// references to the tensors involved until completion: do not modify the
// inputs or read the outputs before Wait() returns OK. Dropping the last copy
// waits for the collective (like a std::future from std::async), so its
// record and any failure are never lost.
class CollectiveHandle {
 public:
  // An empty handle; Wait() returns kFailedPrecondition.
  CollectiveHandle() = default;

  // Blocks until the collective has completed and its outputs are written,
  // then returns its status (the same status on every later call). Errors name
  // the collective, its sequence number, this rank and the timeout.
  absl::Status Wait();
  // True once Wait() would not block (never blocks itself). Does not replace
  // Wait(): outputs are defined once Wait() has returned OK.
  bool IsCompleted();
  // The communicator's sequence number of this collective; -1 when the call
  // was refused before it was issued.
  int64_t sequence() const;

 private:
  friend class Communicator;
  explicit CollectiveHandle(std::shared_ptr<PendingCollective> pending)
      : pending_(std::move(pending)) {}
  std::shared_ptr<PendingCollective> pending_;
};

// Test only: called at moments of the shared-memory segment's setup
// (shm_transport.cc), in the process that reaches them, for tests that
// SIGKILL a rank there. Stages: "created" (local rank 0: the memfd exists,
// its socket not yet published), "served" (local rank 0: the segment handed
// to its first peer, others still waiting; only with 3 or more local ranks),
// "connected" (a peer: connected to local rank 0 and said which rank it is,
// the segment not yet received). nullptr: none.
using ShmSetupHook = void (*)(const char* stage);
void SetShmSetupHookForTesting(ShmSetupHook hook);

// One rank's membership in a group of world_size ranks, over Gloo.
//
// Ordering contract (c10d's): every rank must call the same collectives, with
// matching arguments, in the same order — including the Async variants, whose
// issue order is what counts — or the group hangs until the timeout. Send and
// Recv pair up by (peer, tag) and also count as calls in that order.
//
// Failure contract: a call that fails (an error or a timeout) breaks the
// communicator: it logs the error, and every later call returns
// kFailedPrecondition naming that first failure. There are no retries; the
// tool fails the run. A refused precondition (kInvalidArgument) breaks it too,
// since this rank skipped a collective the others may be in.
//
// Thread safety: calls may come from several threads (e.g. DDP's bucket
// all-reduces from autograd hooks), issue order is the order calls acquire an
// internal lock; a caller that needs a particular order must issue from one
// thread. Handles may be waited on from any thread.

class Communicator {
 public:
  // Builds the Gloo process group over `store` (collective: all world_size
  // ranks call it with their own rank and return once all have connected).
  // Each group needs its own store prefix (Store::WithPrefix).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      const Store& store, const CommunicatorOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int world_size() const;
  absl::string_view backend() const { return "gloo"; }
  // What the collectives run on: "shm" (every rank on this host, shared
  // memory; send and recv still go through Gloo) or "tcp" (Gloo).
  absl::string_view transport() const;
  absl::Duration timeout() const;
  // Where Gloo bound ("hostname 127.0.0.1", "GLOO_SOCKET_IFNAME=eth0", ...).
  const std::string& device_description() const;
  // The store the group met on (its prefix included): for the small
  // metadata exchanges around the collectives (e.g. EstimateClockOffset).
  const Store& store() const;
  // OK while usable, else the first failure.
  absl::Status health() const;

  // Gives the group up after a local failure, e.g. a step that failed with
  // bucket all-reduces in flight, so the rank can exit at once instead of
  // after the collective timeout. Breaks the communicator with `why`; from
  // then on Wait() on an unfinished collective returns kAborted at once, a
  // dropped handle no longer waits, and the destructor leaves the process
  // group (and the work queued in it) to the process exit, since destroying
  // it would wait for work the peers may never issue. Local: no
  // communication; the peers learn of it when this rank exits and the
  // launcher tears the group down. Call it only on the way out.
  void Abandon(const absl::Status& why);

  // Changes the per-collective timeout from the next collective on, e.g.
  // generous for the first step (lazy initialisation, compilation) and tighter
  // afterwards (torchtitan's pattern). Every rank calls it at the same point;
  // no collective of this rank may be in flight (kFailedPrecondition
  // otherwise). A halving-doubling reduce-scatter context is rebuilt at its
  // next use.
  absl::Status SetTimeout(absl::Duration timeout);

  // Same contract as CommunicatorOptions::reduce_scatter_algorithm: every rank
  // switches at the same point.
  void SetReduceScatterAlgorithm(ReduceScatterAlgorithm algorithm);
  ReduceScatterAlgorithm reduce_scatter_algorithm() const;
  void SetAllGatherAlgorithm(AllGatherAlgorithm algorithm);
  AllGatherAlgorithm all_gather_algorithm() const;
  void SetAllReduceAlgorithm(AllReduceAlgorithm algorithm);
  AllReduceAlgorithm all_reduce_algorithm() const;

  // Bytes of the tensors this communicator allocated for its collectives
  // that are still alive: a reduce-scatter's blocks (about its input) until
  // its Wait() has returned (which frees them, unless c10d keeps its work
  // more than 100 ms after completing it) and its handle is dropped,
  // all_gather_v's
  // replicated input (n x the input), the fp32 copies of emulated bfloat16
  // reductions. What a strategy's memory walk counts as collective
  // temporaries. Not counted: Gloo's own buffers, c10d's internal
  // temporaries (the list all-gather's flat output) and the chunked
  // reduce-scatter's staging, which are allocated on other threads.
  // Thread-safe.
  int64_t TemporaryBytes() const;

  // Records of completed collectives, totals and the observer hook.
  CollectiveLog& log();
  const CollectiveLog& log() const;

  // The last collectives and the tool's position (flight_recorder.h): tools
  // call SetPosition at each step/phase and MarkSteady once start-up is over.
  FlightRecorder& flight_recorder();
  // Dumps the flight recorder to `path` at the communicator's first failure
  // (a collective that failed or timed out, a refusal, Abandon) and on
  // SIGTERM and fatal signals (flight_dumps.h), until destroyed.
  void EnableFlightRecorderDumps(const std::string& path);
  // Sends a heartbeat line to `fd` every `interval` until destroyed
  // (heartbeat.h; takes `fd`).
  void StartHeartbeat(int fd, absl::Duration interval);

  // --- Collectives. Each blocking call is its Async variant + Wait(). ---

  // tensor: any shape, same on every rank. Replaced by the reduction over
  // ranks.
  absl::Status AllReduce(const at::Tensor& tensor,
                         ReduceOp op = ReduceOp::kSum);
  CollectiveHandle AllReduceAsync(const at::Tensor& tensor,
                                  ReduceOp op = ReduceOp::kSum);

  // tensor: any shape, same on every rank. Replaced by root's.
  absl::Status Broadcast(const at::Tensor& tensor, int root);
  CollectiveHandle BroadcastAsync(const at::Tensor& tensor, int root);

  // input: k elements, any shape. output: n*k elements, any shape; rank p's
  // input fills flat elements [p*k, (p+1)*k). For a concatenation along dim 0
  // give output the shape (n*input.size(0), input.size(1), ...).
  absl::Status AllGather(const at::Tensor& input, const at::Tensor& output);
  CollectiveHandle AllGatherAsync(const at::Tensor& input,
                                  const at::Tensor& output);

  // outputs: n tensors, each of input's shape; outputs[p] receives rank p's.
  absl::Status AllGatherList(const at::Tensor& input,
                             const std::vector<at::Tensor>& outputs);
  CollectiveHandle AllGatherListAsync(const at::Tensor& input,
                                      const std::vector<at::Tensor>& outputs);

  // Uneven all-gather along dim 0. counts: n row counts, the same on every
  // rank. input: (counts[r], rest...). output: (sum(counts), rest...); rows
  // [counts[0] + ... + counts[p-1], +counts[p]) receive rank p's input.
  absl::Status AllGatherV(const at::Tensor& input, const at::Tensor& output,
                          absl::Span<const int64_t> counts);
  CollectiveHandle AllGatherVAsync(const at::Tensor& input,
                                   const at::Tensor& output,
                                   absl::Span<const int64_t> counts);

  // input: n*k elements, any shape. output: k elements, any shape; receives
  // the reduction over ranks of flat input elements [r*k, (r+1)*k).
  absl::Status ReduceScatter(const at::Tensor& input, const at::Tensor& output,
                             ReduceOp op = ReduceOp::kSum);
  CollectiveHandle ReduceScatterAsync(const at::Tensor& input,
                                      const at::Tensor& output,
                                      ReduceOp op = ReduceOp::kSum);

  // Uneven reduce-scatter along dim 0 (shards of a size n does not divide).
  // counts: n row counts, the same on every rank. input: (sum(counts),
  // rest...). output: (counts[r], rest...); receives the reduction of input
  // rows [counts[0] + ... + counts[r-1], +counts[r]).
  absl::Status ReduceScatterV(const at::Tensor& input, const at::Tensor& output,
                              absl::Span<const int64_t> counts,
                              ReduceOp op = ReduceOp::kSum);
  CollectiveHandle ReduceScatterVAsync(const at::Tensor& input,
                                       const at::Tensor& output,
                                       absl::Span<const int64_t> counts,
                                       ReduceOp op = ReduceOp::kSum);

  // Equal all-to-all along dim 0. input and output: the same shape, with
  // size(0) = n*b. Rows [p*b, (p+1)*b) of input go to rank p; rows
  // [p*b, (p+1)*b) of output come from rank p.
  absl::Status AllToAll(const at::Tensor& input, const at::Tensor& output);
  CollectiveHandle AllToAllAsync(const at::Tensor& input,
                                 const at::Tensor& output);

  // Uneven all-to-all along dim 0. send_counts[p] rows of input go to rank p,
  // in rank order; recv_counts[p] rows of output come from rank p. The counts
  // must agree across ranks (rank p's send_counts[q] == rank q's
  // recv_counts[p]); exchange them first (e.g. AllToAll of an int64 tensor of
  // counts) when only the senders know them. input: (sum(send_counts),
  // rest...), output: (sum(recv_counts), rest...).
  absl::Status AllToAllV(const at::Tensor& input, const at::Tensor& output,
                         absl::Span<const int64_t> send_counts,
                         absl::Span<const int64_t> recv_counts);
  CollectiveHandle AllToAllVAsync(const at::Tensor& input,
                                  const at::Tensor& output,
                                  absl::Span<const int64_t> send_counts,
                                  absl::Span<const int64_t> recv_counts);

  absl::Status Barrier();
  CollectiveHandle BarrierAsync();

  // Point-to-point. The peer calls Recv (Send) with this rank and the same
  // tag; tensor shapes and dtypes must match. Send completes when the data
  // has left this rank's buffer.
  absl::Status Send(const at::Tensor& tensor, int peer, int tag = 0);
  CollectiveHandle SendAsync(const at::Tensor& tensor, int peer, int tag = 0);
  absl::Status Recv(const at::Tensor& tensor, int peer, int tag = 0);
  CollectiveHandle RecvAsync(const at::Tensor& tensor, int peer, int tag = 0);

  class Impl;  // communicator.cc

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_COMMUNICATOR_H_
