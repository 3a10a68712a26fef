// Test-only: a Backend whose ranks are threads of one process sharing memory,
// so the harness and the per-op files can be tested without Gloo or a GPU.
// Every collective snapshots each rank's input, meets at a barrier, computes
// this rank's output from the snapshots, and meets again, so in-place calls
// are as safe as NCCL's. It is an independent second implementation of the
// collectives' semantics: the check pass must agree with it too.
#ifndef MTB_COMM_BENCH_TESTING_THREAD_BACKEND_H_
#define MTB_COMM_BENCH_TESTING_THREAD_BACKEND_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm_bench/backend.h"

namespace mtb::comm_bench::testing {

// Shared by the ranks of one group.
class ThreadGroup;

struct ThreadBackendOptions {
  // A deliberate bug for tests: all_gather and all_to_all take block p from
  // rank (p + 1) % n instead of rank p; reductions add 1 to element 0;
  // broadcast delivers rank (root + 1) % n's buffer; all_to_allv reads each
  // source's block at the offset of the block meant for the next rank
  // (rank + 1) % n, as a sender whose split offsets are shifted by one peer
  // would (clipped to the source's buffer; what is left keeps its old
  // contents).
  bool misroute = false;
  // Combinations Supports() refuses (kInvalidArgument), to test that path.
  bool refuse_bfloat16 = false;
};

class ThreadBackend : public Backend {
 public:
  ThreadBackend(std::shared_ptr<ThreadGroup> group, int rank,
                ThreadBackendOptions options = {});
  ~ThreadBackend() override;

  std::string name() const override { return "threads"; }
  int rank() const override { return rank_; }
  int world_size() const override;
  absl::StatusOr<Support> Supports(OpKind op, DType dtype,
                                   RedOp redop) const override;
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t bytes) override;
  absl::Status CopyFromHost(void* destination, const void* source,
                            int64_t bytes) override;
  absl::Status CopyToHost(void* destination, const void* source,
                          int64_t bytes) override;
  absl::Status AllReduce(const void* send, void* recv, int64_t count,
                         DType dtype, RedOp op) override;
  absl::Status Broadcast(const void* send, void* recv, int64_t count,
                         DType dtype, int root) override;
  absl::Status AllGather(const void* send, void* recv, int64_t send_count,
                         DType dtype) override;
  absl::Status ReduceScatter(const void* send, void* recv, int64_t recv_count,
                             DType dtype, RedOp op) override;
  absl::Status AllToAll(const void* send, void* recv, int64_t count_per_peer,
                        DType dtype) override;
  absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                         void* recv, const std::vector<int64_t>& recv_counts,
                         DType dtype) override;
  // Threads share memory: one region for the group (the shared-memory
  // ceiling's, with SweepOptions::transport "shm").
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateShared(int64_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::Status Barrier() override;
  absl::Status BeginInterval() override;
  absl::StatusOr<double> EndInterval() override;
  absl::StatusOr<std::string> AllGatherHostBytes(absl::string_view local) override;
  std::string LastAlgorithm() const override { return "shared_memory"; }

 private:
  // Publishes `bytes` of `data` (and `counts`) as this rank's snapshot and
  // waits for every rank's.
  void Publish(const void* data, int64_t bytes,
               const std::vector<int64_t>& counts = {});
  const std::string& Snapshot(int rank) const;
  const std::vector<int64_t>& Counts(int rank) const;
  void Done();  // everyone has read the snapshots

  std::shared_ptr<ThreadGroup> group_;
  const int rank_;
  const ThreadBackendOptions options_;
  double interval_start_ = 0;
};

// A group for `world_size` ranks.
std::shared_ptr<ThreadGroup> NewThreadGroup(int world_size);

// Runs body(rank) on `world_size` threads (each logging as its rank) and
// returns their statuses in rank order.
std::vector<absl::Status> RunRanks(int world_size,
                                   const std::function<absl::Status(int)>& body);

}  // namespace mtb::comm_bench::testing

#endif  // MTB_COMM_BENCH_TESTING_THREAD_BACKEND_H_
