// The NCCL backend: NCCL's C API on CUDA buffers, one GPU per rank (the
// rank's LOCAL_RANK modulo the visible devices), one stream per rank. Built
// only with --config=cuda; links no LibTorch. CUDA types stay in
// nccl_backend.cc.
//
// all_to_all and all_to_allv are grouped ncclSend/ncclRecv (as nccl-tests),
// not ncclAlltoAll, so the binary also loads against NCCL releases older than
// the 2.28 it was built with (>= 2.10 for bfloat16).
#ifndef MTB_COMM_BENCH_NCCL_BACKEND_H_
#define MTB_COMM_BENCH_NCCL_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "comm_bench/backend.h"

namespace mtb::comm_bench {

// NCCL's unique id (ncclUniqueId) as opaque bytes, so callers need no NCCL
// header to exchange it.
inline constexpr int kNcclIdBytes = 128;

// What the NCCL loaded at run time supports: everything comm_bench sweeps,
// bfloat16 from NCCL 2.10 on (kInvalidArgument naming the version before).
absl::StatusOr<Support> NcclSupports(OpKind op, DType dtype, RedOp redop);

// Rank 0 makes the id; the others receive it (nccl_bootstrap.h).
absl::StatusOr<std::string> NewNcclId();

struct NcclBackendOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string nccl_id;  // kNcclIdBytes bytes from rank 0's NewNcclId()
};

// Selects the GPU, creates the stream and the communicator (collective: every
// rank calls it). kFailedPrecondition without a usable GPU ("CUDA driver
// version is insufficient" and the like), naming the rank and the device.
absl::StatusOr<std::unique_ptr<Backend>> NewNcclBackend(
    const NcclBackendOptions& options);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_NCCL_BACKEND_H_
