// Internal to common/collective: the shared-memory transport the Communicator
// uses for ranks on one host (docs/collective.md, "Shared memory").
//
// Vocabulary. The *local group* is the ranks of one host; *local rank* l is a
// rank's index in it. The *segment* is one anonymous memory file (memfd)
// created by local rank 0 and passed to the others over a Unix socket
// (SCM_RIGHTS); nothing is ever named in /dev/shm, so no kill leaves memory
// behind: the kernel frees it with the last mapping. Each local rank owns a
// *control* block (its pid, three step counters and its sleepers) and
// `slots` *slots* of `slot_bytes` each, which only it writes except where an
// algorithm says.
// Every collective is one or more *steps*, numbered alike on every rank (all
// ranks issue the same collectives in the same order, so they compute the same
// steps); step t uses slot t % slots, so consecutive steps (and consecutive
// collectives) do not wait for each other beyond the reuse of a slot two steps
// back. Within a step a rank *publishes* a phase by storing t in its counter
// (copied: its slot holds this step's input; reduced: its slice of the slot
// holds the reduction; done: it has finished reading the peers' slots) and
// *waits* for the peers' counters to reach t. Messages larger than a slot are
// *streamed*: one step per slot-sized chunk, so memory stays
// local_size * slots * slot_bytes whatever the message. All-reduce and
// broadcast *pipeline* their streamed steps (RunPipelined): a rank copies
// chunk k+1 in (step t+1) before it waits for the peers' chunk k, and a
// broadcast's root runs up to `slots` chunks ahead of its readers, who copy
// each chunk out piece by piece as the root copies it in (a progress word in
// the root's slot header), so even a one-chunk broadcast overlaps its copy in
// and its copies out. Reduce-scatter, all-gather and all-to-all run one step
// at a time (copy in, wait, copy out): pipelining them measured no gain
// (all-gather and all-to-all at 1 MiB read slower in the one A/B).
//
// Waiting spins briefly, then yields a few times, then sleeps on the peer's
// counter (a futex in the segment) until the peer publishes and wakes it: no
// core burned while a peer computes, and no nap's latency once it is done.
// The sleep is cut every 10 ms to check the deadline, the abort flag and
// whether the awaited peer's process still exists (/proc/<pid>/stat, zombies
// count as gone); failures throw std::runtime_error
// whose text the collective layer maps like Gloo's ("timed out" ->
// kDeadlineExceeded, "Connection closed" -> kUnavailable).
//
// Thread safety: one thread runs the collectives (the Communicator's serial
// worker); Abort() may be called from any thread.
#ifndef MTB_COMMON_COLLECTIVE_SHM_TRANSPORT_H_
#define MTB_COMMON_COLLECTIVE_SHM_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/shm_reduce.h"
#include "common/collective/store.h"

namespace mtb::collective {

// Who this rank is on its host: hostname, boot id and network namespace
// ("host/boot-id/net:[4026531840]"). Ranks with equal identities share memory
// and an abstract Unix socket namespace.
std::string HostIdentity();

struct ShmGroupOptions {
  int local_rank = 0;
  int local_size = 1;
  // Global rank of each local rank (for messages).
  std::vector<int> global_ranks;
  // Data bytes of one slot of one rank; rounded down to 64 bytes, >= 4 KiB.
  int64_t slot_bytes = int64_t{1} << 20;
  // Slots per rank; at least 2 (the pipelined loop's next chunk uses the
  // other slot).
  int slots = 2;
  // All-reduce chunks up to this many bytes use the naive algorithm (every
  // rank reduces every input); larger ones the sliced one.
  int64_t naive_all_reduce_max_bytes = int64_t{256} << 10;
  // How long Create waits for the peers to connect.
  absl::Duration connect_timeout = absl::Minutes(1);
};

// What a test may break on purpose, to show that the tests catch it.
enum class ShmTestOnlyFault {
  kNone,
  // Sliced all-reduce and reduce-scatter: this rank reduces the next rank's
  // slice instead of its own. Naive all-reduce: the last rank's input is left
  // out. All-gather, broadcast, all-to-all: the peer's data lands in the
  // block of the next rank.
  kMisassignSlices,
};

class ShmGroup {
 public:
  // Collective over the local group: local rank 0 creates the segment and
  // hands it to the others through `store` (a per-group prefix) and an
  // abstract Unix socket whose name is random; only processes of this user
  // receive it (SO_PEERCRED).
  static absl::StatusOr<std::unique_ptr<ShmGroup>> Create(const Store& store,
                                                          const ShmGroupOptions& options);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int local_rank() const { return options_.local_rank; }
  int local_size() const { return options_.local_size; }
  int64_t segment_bytes() const { return segment_bytes_; }
  // "shm (2 ranks, 2 slots x 1 MiB per rank)".
  std::string Describe() const;

  // Each collective throws std::runtime_error on a timeout (past `deadline`),
  // a lost peer or an abort; the group is unusable afterwards.

  // `data`: count elements, replaced by the reduction over the local ranks
  // (rank order, the same bits on every rank), by the algorithm
  // NaiveAllReduce(count * element size) names.
  void AllReduce(void* data, int64_t count, ShmDtype dtype, ShmReduceOp op, absl::Time deadline);
  // inputs[p]: block_elements[p] elements, this rank's contribution to local
  // rank p; output: block_elements[local_rank] elements, the reduction. The
  // output may be inputs[local_rank] itself.
  void ReduceScatter(const std::vector<const void*>& inputs,
                     const std::vector<int64_t>& block_elements, void* output, ShmDtype dtype,
                     ShmReduceOp op, absl::Time deadline);
  // input: block_bytes[local_rank] bytes; outputs[p] receives local rank p's
  // block_bytes[p] bytes. input may be outputs[local_rank].
  void AllGather(const void* input, const std::vector<void*>& outputs,
                 const std::vector<int64_t>& block_bytes, absl::Time deadline);
  void Broadcast(void* data, int64_t bytes, int root, absl::Time deadline);
  // inputs[p] (send_bytes[p]) goes to local rank p; outputs[p] (recv_bytes[p])
  // receives local rank p's block for this rank. Inputs and outputs do not
  // overlap.
  void AllToAll(const std::vector<const void*>& inputs, const std::vector<int64_t>& send_bytes,
                const std::vector<void*>& outputs, const std::vector<int64_t>& recv_bytes,
                absl::Time deadline);
  void Barrier(absl::Time deadline);

  // Wakes any wait with a failure; every later collective fails at once.
  void Abort();

  // Whether an all-reduce of `bytes` runs naive (every rank reduces every
  // input) rather than sliced.
  bool NaiveAllReduce(int64_t bytes) const {
    return options_.local_size == 1 || bytes <= options_.naive_all_reduce_max_bytes;
  }

  void SetTestOnlyFault(ShmTestOnlyFault fault) { fault_ = fault; }

  struct Control;  // shm_transport.cc

 private:
  ShmGroup(ShmGroupOptions options, void* base, int64_t segment_bytes);

  Control& control(int local_rank) const;
  char* slot(int local_rank, uint64_t step) const;
  // Starts step t (returned): waits until every peer has finished step
  // t - slots, whose slot this step reuses.
  uint64_t BeginStep(absl::Time deadline);
  enum class Phase { kCopied, kReduced, kDone };
  void Publish(Phase phase, uint64_t step);
  // The streaming loop of all-reduce and broadcast: `produce(index, step)`
  // begins the step (BeginStep) and copies chunk `index` in;
  // `consume(index, step)` waits for the peers and finishes the chunk. Chunk
  // k+1 is produced before chunk k is consumed. `*chunks` may grow during
  // consume(0); at least one step runs.
  template <typename Produce, typename Consume>
  void RunPipelined(int64_t* chunks, absl::Time deadline, Produce produce, Consume consume);
  // Waits for every peer (or only `only`, when >= 0) to publish `phase` of
  // `step`.
  void WaitPeers(Phase phase, uint64_t step, absl::Time deadline, int only = -1);
  void WaitOne(int peer, Phase phase, uint64_t step, absl::Time deadline);
  bool PeerGone(int peer) const;

  const ShmGroupOptions options_;
  void* const base_;
  const int64_t segment_bytes_;
  int64_t control_bytes_ = 0;
  int64_t slot_stride_ = 0;  // bytes from one slot to the next
  uint64_t step_ = 0;        // the last step begun (serial worker only)
  std::atomic<bool> aborted_{false};
  ShmTestOnlyFault fault_ = ShmTestOnlyFault::kNone;
};

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_SHM_TRANSPORT_H_
