// What the comm_bench harness needs from a communication library, over raw
// buffers so that one harness serves Gloo (host memory, through //common/collective)
// and NCCL (CUDA memory, through its C API) without LibTorch or CUDA headers.
//
// Contract:
//  - One Backend per rank. Collectives and Barrier are collective: every rank
//    calls them in the same order with matching arguments (c10d's rule).
//  - Buffers come from Allocate and live in the backend's memory (host for
//    Gloo, this rank's GPU for NCCL); pointers passed to collectives point into
//    such buffers. Host memory is reached only through CopyFromHost/CopyToHost.
//  - A collective may return before it completes (NCCL enqueues on a stream).
//    Synchronize() returns once everything this rank issued has completed;
//    only then may results be copied back.
//  - Not thread-safe: one thread drives a Backend.
#ifndef MTB_COMM_BENCH_BACKEND_H_
#define MTB_COMM_BENCH_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "comm_bench/dtype.h"

namespace mtb::comm_bench {

enum class OpKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kAllToAll,
  kAllToAllV,
};

// Memory owned by a backend; freed by the destructor.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() const = 0;
  virtual int64_t bytes() const = 0;
};

// How a backend runs an (op, dtype, redop) combination it supports.
struct Support {
  // True when the backend converts the data for the transport (Gloo's bf16:
  // reductions in fp32, copies as an int16 view): rows are labelled emulated.
  bool emulated = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "gloo", "nccl"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // OK with how it runs, or kInvalidArgument saying why the combination is
  // not supported (comm_bench exits 2 before anything runs). `redop` matters
  // only for reductions.
  virtual absl::StatusOr<Support> Supports(OpKind op, DType dtype,
                                           RedOp redop) const = 0;

  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      int64_t bytes) = 0;
  virtual absl::Status CopyFromHost(void* destination, const void* source,
                                    int64_t bytes) = 0;
  virtual absl::Status CopyToHost(void* destination, const void* source,
                                  int64_t bytes) = 0;

  // The collectives, in nccl-tests' argument conventions. `send` may equal
  // `recv` (all_reduce, broadcast) or point into it (in-place all_gather:
  // send = recv + rank * send_count; in-place reduce_scatter: recv = send +
  // rank * recv_count), as NCCL allows.
  virtual absl::Status AllReduce(const void* send, void* recv, int64_t count,
                                 DType dtype, RedOp op) = 0;
  // `send` is read on `root` only.
  virtual absl::Status Broadcast(const void* send, void* recv, int64_t count,
                                 DType dtype, int root) = 0;
  // recv holds world_size * send_count elements, rank r's at r * send_count.
  virtual absl::Status AllGather(const void* send, void* recv,
                                 int64_t send_count, DType dtype) = 0;
  // send holds world_size * recv_count elements; rank r gets the reduction of
  // every rank's block r.
  virtual absl::Status ReduceScatter(const void* send, void* recv,
                                     int64_t recv_count, DType dtype,
                                     RedOp op) = 0;
  // Block p of `send` (count_per_peer elements) goes to rank p; block p of
  // `recv` comes from rank p.
  virtual absl::Status AllToAll(const void* send, void* recv,
                                int64_t count_per_peer, DType dtype) = 0;
  // Packed blocks: send_counts[p] elements to rank p, recv_counts[p] from it,
  // each buffer laid out in rank order without gaps.
  virtual absl::Status AllToAllV(const void* send,
                                 const std::vector<int64_t>& send_counts,
                                 void* recv,
                                 const std::vector<int64_t>& recv_counts,
                                 DType dtype) = 0;

  // Waits for everything this rank issued.
  virtual absl::Status Synchronize() = 0;
  // Synchronize(), then waits for every rank to get here.
  virtual absl::Status Barrier() = 0;

  // Per-iteration timing: EndInterval waits for everything issued since
  // BeginInterval and returns the seconds in between, measured the way the
  // backend measures correctly (steady clock for Gloo, CUDA events for NCCL).
  virtual absl::Status BeginInterval() = 0;
  virtual absl::StatusOr<double> EndInterval() = 0;

  // Every rank contributes `local` (the same length on every rank) and gets
  // all contributions concatenated in rank order. Host memory; for results,
  // not for measurements.
  virtual absl::StatusOr<std::string> AllGatherHostBytes(
      absl::string_view local) = 0;

  // `bytes` of host memory mapped by every rank (zero-filled), for the
  // shared-memory ceiling the sweep measures (shm_ceiling.h), or
  // kUnimplemented where the ranks share none (NCCL, Gloo over TCP).
  // Collective, like Barrier.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateShared(int64_t bytes) {
    return absl::UnimplementedError(absl::StrCat(name(), ": no memory shared by the ranks"));
  }

  // What the collective layer recorded for the last collective it ran
  // ("gloo_allreduce", ...), or "" when it does not say.
  virtual std::string LastAlgorithm() const { return ""; }
};

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_BACKEND_H_
